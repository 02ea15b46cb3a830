#!/usr/bin/env python3
"""Build the carry folder that lets verl run on the GPU machine (issue 29): wheels for CPython 3.12 on
x86_64 Linux of everything `cuda-agent rl train` imports there and the GPU image lacks, Ray repacked
without its Java jars. Run on a machine with registry access (`scripts/device-wheels.sh --rl` calls it).

Contract: `python3 scripts/rl_carry.py DIR [--budget-mib 60]` fills DIR with wheels and writes
DIR/MANIFEST.txt (name, version, MiB per wheel, total), exit 0; exit 1 when the total passes the budget
(the device tool carries 64 MiB in all, the checkout included) or a download fails, with one line.
Which packages: the requirement closure of verl 0.9.1, Ray, the project's `rl` extra and its own core
dependencies, walked through the installed metadata of this machine (the versions the CPU tests ran
with are the versions carried), minus the packages the GPU image holds (`gpu-image-packages.txt` beside
this file: the image's list as the device docs read it on 2026-11-17), minus what is never imported on
the training path (`SKIP`, each with its reason). `FORCE` lists image packages carried anyway because
the image's version is outside what verl or transformers accept.
Not guaranteed: that the image still holds what the list says (the device script prints the versions
it finds and the imports that fail, first); wheels for any other Python or platform.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

HERE = Path(__file__).resolve().parent
# openai (the project's core dependency) is left out: only `cuda_agent.llm.client` imports it, and nothing
# on the training path does (verl's agent loop talks to the rollout through Ray)
ROOTS = [
    "verl",
    "ray",
    "transformers",
    "cachetools",
    "uvicorn",
    "fastapi",
    "TransferQueue",
    "pyzmq",
    "msgspec",
    "rich",
    "pyarrow",
]
# Ray 2.41.0, the oldest verl 0.9.1 accepts: its cp312 wheel is 64.3 MiB, 28.8 of it Java jars; 2.60.0 (this
# machine's) has no jars but 45 MiB of binaries, which leaves no room for the rest
RAY_VERSION = "2.41.0"
# in the image, but at a version the carried stack refuses: verl 0.9.1 wants transformers < 5.11 (the
# image had 5.17), and transformers 5.10 checks at import that tokenizers is <= 0.23.0 (the image had 0.23.2)
FORCE = {"transformers", "tokenizers"}
# never imported by `rl train` (verl imports them only for loggers or extras the configs do not choose);
# together about 20 MiB that the carry cannot spare
SKIP = {
    "wandb": "verl imports it only for trainer.logger=wandb (the configs log to the console)",
    "cwevals": "wandb's",
    "py-spy": "a profiler extra",
    "opencensus": "Ray's dashboard (ray[default])",
    "aiohttp-cors": "Ray's dashboard",
    "colorful": "Ray's dashboard",
    "smart-open": "Ray's dashboard",
    "virtualenv": "Ray's runtime_env pip plugin",
    "opentelemetry-sdk": "wandb's exporter",
    "opentelemetry-exporter-otlp-proto-http": "wandb's exporter",
}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "linux_x86_64"]
ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages() -> set[str]:
    lines = (HERE / "gpu-image-packages.txt").read_text().splitlines()
    return {norm(ln.strip()) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")}


def closure(image: set[str]) -> list[tuple[str, str]]:
    """(name, installed version) of every package to carry, breadth first from ROOTS."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    queue = list(ROOTS)
    while queue:
        name = queue.pop(0)
        key = norm(name)
        if key in seen:
            continue
        seen.add(key)
        if key in SKIP or (key in image and key not in FORCE):
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SystemExit(
                f"rl_carry: {name} is not installed here; install the rl extra first (pip install -e '.[rl]')"
            ) from None
        out.append((dist.metadata["Name"], RAY_VERSION if key == "ray" else dist.version))
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(ENV):
                queue.append(req.name)
    return out


def _pip(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def download(name: str, version: str, dest: Path) -> str:
    """Fetch one wheel for the GPU machine into `dest`; returns what was fetched ("name==version", or
    "name (latest)" where this machine's version has no CPython 3.12 wheel, e.g. an old orjson)."""
    binary = [
        "download",
        "-q",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        *(a for p in PLATFORMS for a in ("--platform", p)),
        "-d",
        str(dest),
    ]
    spec = f"{name}=={version}"
    if _pip([*binary, spec]).returncode == 0:
        return spec
    # no wheel on the registry (antlr4-python3-runtime 4.9.3 is an sdist): build one, if it is pure Python
    with tempfile.TemporaryDirectory() as t:
        if _pip(["wheel", "-q", "--no-deps", "-w", t, spec]).returncode == 0:
            built = list(Path(t).glob("*.whl"))
            if built and all(w.name.endswith("-none-any.whl") for w in built):
                for w in built:
                    w.replace(dest / w.name)
                return spec
    p = _pip([*binary, name])
    if p.returncode == 0:
        return f"{name} (latest; {version} has no wheel for CPython 3.12)"
    lines = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.startswith("ERROR")] or ["(no message)"]
    raise SystemExit(f"rl_carry: no wheel of {name} for the GPU machine: {lines[-1]}")


def _record_line(name: str, data: bytes) -> str:
    digest = urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dropped(name: str) -> bool:
    # Java for Ray's cross-language calls, and the dashboard's JavaScript source maps: nothing Python loads
    return name.startswith("ray/jars/") or (name.startswith("ray/dashboard/client/build/") and name.endswith(".map"))


def repack_without_jars(wheel: Path) -> Path:
    """The same wheel without what `_dropped` names, its RECORD rewritten to match, so pip installs it as
    it would the original."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        lines = []
        for info in src.infolist():
            if _dropped(info.filename) or info.filename == record_name:
                continue
            data = src.read(info)
            dst.writestr(info, data)
            lines.append(_record_line(info.filename, data))
        dst.writestr(record_name, "\n".join([*lines, f"{record_name},,"]) + "\n")
    tmp.replace(wheel)
    return wheel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--budget-mib", type=float, default=60.0)
    args = ap.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for old in args.dest.glob("*.whl"):
        old.unlink()
    wanted = closure(image_packages())
    with tempfile.TemporaryDirectory() as t:
        fetched = [download(name, version, Path(t)) for name, version in wanted]
        for w in Path(t).glob("*.whl"):
            if w.name.startswith("ray-"):
                repack_without_jars(w)
            w.replace(args.dest / w.name)
    rows = sorted(((w.name, w.stat().st_size / 2**20) for w in args.dest.glob("*.whl")), key=lambda r: -r[1])
    total = sum(mib for _, mib in rows)
    text = (
        "\n".join(f"{mib:7.2f} MiB  {name}" for name, mib in rows) + f"\n{total:7.2f} MiB  total, {len(rows)} wheels\n"
    )
    text += "".join(f"note: {f}\n" for f in fetched if "latest" in f)
    (args.dest / "MANIFEST.txt").write_text(text)
    print(text, end="")
    if total > args.budget_mib:
        print(f"rl_carry: {total:.1f} MiB is over the {args.budget_mib:g} MiB budget", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
