"""Campaign controllers: epochs, micro-batches, matched monitoring and the single rollback decision."""
