"""A wheelhouse for installing ablate where no package registry is reachable (a lent card).

    python bench/build_wheelhouse.py --dest .wheelhouse       # here, where pip reaches PyPI
    WHEELHOUSE=.wheelhouse bash bench/gpu_check.sh            # there, offline
    python bench/build_wheelhouse.py check                    # there: every requirement met?

`build` (the default) walks ablate's runtime requirements recursively from this environment's
installed distributions (their exact versions), with the markers evaluated for the target
(`--python-version`, Linux x86_64 by default), plus `--extra` requirements (default moto's S3
server: `moto[s3]`, flask, flask-cors, for the checkpoint-stall bench). It leaves out what the
target already has (`--have`, default `bench/h200-image-packages.txt`, the lent H200 image's
list) unless a requirement pins it exactly or `--carry` names it (default fsspec: s3fs admits
its own release only), and torch always. It downloads one binary wheel of each for the target's
Python and platform (`pip download --no-deps --only-binary=:all:`), building a wheel here only
for a pure-Python project that publishes none, and prints what it took and the size against the
64 MiB a lent machine's copy of the working tree may hold. A requirement needed only on the
target's Python (none installed here) is downloaded at the newest version its specifier allows,
and named.

`check` runs in an installed environment (the target's venv): every requirement of the same
closure resolved and in its specifier, else one line per problem and exit 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
HAVE = Path(__file__).resolve().parent / "h200-image-packages.txt"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]  # fmt: skip
ALWAYS_THERE = {"torch"}
"""The target's own build of these is the point: never carried."""
MOTO_S3_SERVER = ["moto[s3]", "flask", "flask-cors"]
"""moto's S3 server and nothing more: `moto[server]` brings every service's needs (cfn-lint,
docker, graphql...), 9 MiB the stall bench does not use."""
TREE_LIMIT = 64 * 2**20
"""What a lent machine receives: the working tree and carried folders together."""


@dataclass
class Closure:
    """Every distribution the requirements reach: name -> pinned version (None: not installed
    here), the specifiers seen for each, and which were pinned exactly."""

    versions: dict[str, str | None] = field(default_factory=dict)
    specifiers: dict[str, list[Requirement]] = field(default_factory=dict)


def target_markers(python: str) -> dict[str, str]:
    """Marker variables of a CPython `python` (e.g. 3.12) on Linux x86_64."""
    env = dict(default_environment())
    full = python if python.count(".") == 2 else f"{python}.0"
    env.update(
        python_version=".".join(python.split(".")[:2]), python_full_version=full,
        sys_platform="linux", platform_system="Linux", platform_machine="x86_64",
        os_name="posix", implementation_name="cpython",
        platform_python_implementation="CPython",
    )  # fmt: skip
    return env


def walk(roots: list[str], markers: dict[str, str]) -> Closure:
    """The closure of `roots` (requirement strings) over this environment's distributions."""
    closure = Closure()
    queue = [Requirement(r) for r in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while queue:
        req = queue.pop()
        name = canonicalize_name(req.name)
        closure.specifiers.setdefault(name, []).append(req)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            closure.versions.setdefault(name, None)
            continue
        closure.versions[name] = dist.version
        for text in dist.requires or []:
            sub = Requirement(text)
            extras = req.extras or {""}
            if sub.marker is None or any(
                sub.marker.evaluate({**markers, "extra": e}) for e in extras
            ):
                queue.append(Requirement(str(sub).split(";")[0]))
    return closure


def roots(extra: list[str]) -> list[str]:
    """ablate's runtime requirements (no extras) plus `extra`."""
    base = [r for r in metadata.requires("ablate") or [] if "extra ==" not in r]
    return [r.split(";")[0].strip() for r in base] + extra


def pinned(req: Requirement) -> bool:
    """Whether `req` admits one release only (`==1.2.3`, not `==1.*`)."""
    return any(
        s.operator == "===" or (s.operator == "==" and "*" not in s.version) for s in req.specifier
    )


def wanted(closure: Closure, have: set[str], carry: set[str]) -> tuple[list[str], list[str]]:
    """(what to download as `name==version` or `name<spec>`, what is needed only there)."""
    pins, newest = [], []
    for name, version in sorted(closure.versions.items()):
        if name in ALWAYS_THERE or name == "ablate":
            continue
        exact = any(pinned(s) for s in closure.specifiers[name])
        if name in have and not exact and name not in carry:
            continue
        if version is not None:
            pins.append(f"{name}=={version}")
        else:
            spec = ",".join(str(s.specifier) for s in closure.specifiers[name] if s.specifier)
            newest.append(f"{name}{spec}")
    return pins, newest


def download(specs: list[str], dest: Path, python: str) -> list[str]:
    """Binary wheels for the target, one pip call; those pip refuses, tried one by one, then
    built here (pure Python only). Returns the specs that could not be had."""
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp",
            "--abi", f"cp{python.replace('.', '')[:3]}", "--abi", "abi3", "--abi", "none",
            *[a for p in PLATFORMS for a in ("--platform", p)], "--platform", "any",
            "-d", str(dest), "-q"]  # fmt: skip
    if not specs or subprocess.run([*base, *specs]).returncode == 0:
        return []
    missing = []
    for spec in specs:
        if subprocess.run([*base, spec], capture_output=True).returncode == 0:
            continue
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), spec],
            capture_output=True,
        )
        pure = [w for w in dest.glob(f"{Requirement(spec).name.replace('-', '_')}*-none-any.whl")]
        if built.returncode != 0 or not pure:
            missing.append(spec)
    return missing


def tree_bytes() -> int:
    """The tracked files' size: what travels besides the wheelhouse."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return sum((ROOT / n).stat().st_size for n in names if (ROOT / n).is_file())


def build(args: argparse.Namespace) -> int:
    lines = [line.split("#")[0].strip() for line in args.have.read_text().splitlines()]
    have = {canonicalize_name(line) for line in lines if line}
    closure = walk(roots(args.extra), target_markers(args.python_version))
    pins, newest = wanted(closure, have, {canonicalize_name(c) for c in args.carry})
    there = len(set(closure.versions) & (have | ALWAYS_THERE))
    only = f", {len(newest)} newest for Python {args.python_version} only: {newest}"
    print(
        f"closure: {len(closure.versions)} distributions; the target has {there}; to carry: "
        f"{len(pins)} pinned{only if newest else ''}"
    )
    if args.dry_run:
        print("\n".join(pins + newest))
        return 0
    args.dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dest) as scratch:
        missing = download(pins + newest, Path(scratch), args.python_version)
        for wheel in Path(scratch).glob("*.whl"):
            wheel.replace(args.dest / wheel.name)
    wheels = sorted(args.dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    tree = tree_bytes()
    biggest = sorted(wheels, key=lambda w: w.stat().st_size, reverse=True)[:3]
    print(
        f"wheelhouse {args.dest}: {len(wheels)} wheels, {size / 2**20:.1f} MiB (largest: "
        + ", ".join(f"{w.name.split('-')[0]} {w.stat().st_size / 2**20:.1f}" for w in biggest)
        + f"); with the tracked tree ({tree / 2**20:.1f} MiB): {(size + tree) / 2**20:.1f} MiB "
        f"of the {TREE_LIMIT / 2**20:.0f} MiB a lent machine receives: "
        + ("fits" if size + tree <= TREE_LIMIT else "DOES NOT FIT")
    )
    if missing:
        print(f"NOT downloaded (no wheel for the target, none built): {missing}")
    return 1 if missing or size + tree > TREE_LIMIT else 0


def check(args: argparse.Namespace) -> int:
    """Every requirement of the closure resolved here, within its specifiers."""
    markers = {k: str(v) for k, v in default_environment().items()}
    closure = walk(roots(args.extra), markers)
    problems = []
    for name, version in sorted(closure.versions.items()):
        if version is None:
            problems.append(f"{name}: not installed")
            continue
        for req in closure.specifiers[name]:
            if req.specifier and not req.specifier.contains(Version(version), prereleases=True):
                problems.append(f"{name} {version}: does not meet {req}")
    for line in problems:
        print(line)
    verdict = "all requirements met" if not problems else f"{len(problems)} problem(s)"
    print(f"{len(closure.versions)} distributions checked on Python {platform.python_version()}: "
          f"{verdict}")  # fmt: skip
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["build", "check"], default="build")
    parser.add_argument("--dest", type=Path, default=ROOT / ".wheelhouse")
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--have", type=Path, default=HAVE, help="what the target already has")
    parser.add_argument("--extra", action="append", default=None,
                        help="more requirements (default: moto's S3 server)")  # fmt: skip
    parser.add_argument(
        "--carry", action="append", default=["fsspec"],
        help="carry even if the target has it (default fsspec: s3fs admits its own release only)",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="list, download nothing")
    args = parser.parse_args()
    args.extra = MOTO_S3_SERVER if args.extra is None else [e for e in args.extra if e]
    return check(args) if args.command == "check" else build(args)


if __name__ == "__main__":
    sys.exit(main())
