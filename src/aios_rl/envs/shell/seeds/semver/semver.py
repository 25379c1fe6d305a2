"""Semantic version parsing, precedence, bumping and range constraints."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Version:
    """A parsed version ``major.minor.patch[-prerelease]``."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(self.prerelease) if self.prerelease else "")


def parse(text: str) -> Version:
    """Parse ``1.2.3`` or ``1.2.3-rc.1``; build metadata after ``+`` is ignored.

    Raises:
        ValueError: on a malformed version or a number with a leading zero.
    """
    core, _, _build = text.strip().lstrip("v").partition("+")
    core, dash, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"invalid version: {text!r}")
    if any(len(p) > 1 and p[0] == "0" for p in parts):
        raise ValueError(f"leading zero in {text!r}")
    prerelease = tuple(pre.split(".")) if dash else ()
    if dash and not all(prerelease):
        raise ValueError(f"empty pre-release identifier in {text!r}")
    return Version(int(parts[0]), int(parts[1]), int(parts[2]), prerelease)


def _compare_identifiers(a: str, b: str) -> int:
    if a.isdigit() and b.isdigit():
        x, y = int(a), int(b)
    elif a.isdigit():
        return -1
    elif b.isdigit():
        return 1
    else:
        x, y = a, b
    return (x > y) - (x < y)


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1 by semver precedence; a pre-release sorts before its release."""
    left = (a.major, a.minor, a.patch)
    right = (b.major, b.minor, b.patch)
    if left != right:
        return -1 if left < right else 1
    if not a.prerelease or not b.prerelease:
        return (not a.prerelease) - (not b.prerelease)
    for x, y in zip(a.prerelease, b.prerelease):
        result = _compare_identifiers(x, y)
        if result != 0:
            return result
    n, m = len(a.prerelease), len(b.prerelease)
    return (n > m) - (n < m)


def bump(version: Version, part: str) -> Version:
    """Next version for a ``major``, ``minor`` or ``patch`` release.

    Bumping a pre-release patch to ``patch`` just drops the pre-release tag.
    """
    if part == "major":
        return Version(version.major + 1, 0, 0)
    if part == "minor":
        return Version(version.major, version.minor + 1, 0)
    if part == "patch":
        extra = 0 if version.prerelease else 1
        return Version(version.major, version.minor, version.patch + extra)
    raise ValueError(f"unknown part {part!r}")


def _caret_upper(base: Version) -> Version:
    if base.major > 0:
        return Version(base.major + 1, 0, 0)
    if base.minor > 0:
        return Version(0, base.minor + 1, 0)
    return Version(0, 0, base.patch + 1)


def satisfies(version: Version, constraint: str) -> bool:
    """Whether ``version`` meets every space-separated term of ``constraint``.

    Terms: ``^1.2.3``, ``~1.2.3``, ``>=``, ``>``, ``<=``, ``<``, ``=`` or a bare version.
    """
    for term in constraint.split():
        if term.startswith("^"):
            base = parse(term[1:])
            ok = compare(version, base) >= 0 and compare(version, _caret_upper(base)) < 0
        elif term.startswith("~"):
            base = parse(term[1:])
            upper = Version(base.major, base.minor + 1, 0)
            ok = compare(version, base) >= 0 and compare(version, upper) < 0
        elif term[:2] in (">=", "<="):
            result = compare(version, parse(term[2:]))
            ok = result >= 0 if term[0] == ">" else result <= 0
        elif term[0] in "<>":
            result = compare(version, parse(term[1:]))
            ok = result > 0 if term[0] == ">" else result < 0
        else:
            ok = compare(version, parse(term.lstrip("="))) == 0
        if not ok:
            return False
    return True


def max_satisfying(versions: list[str], constraint: str) -> str | None:
    """The highest of ``versions`` that satisfies ``constraint``, or ``None``."""
    best = None
    for text in versions:
        candidate = parse(text)
        if satisfies(candidate, constraint) and (best is None or compare(candidate, best) > 0):
            best = candidate
    return None if best is None else str(best)
