"""Local stand-ins for the compose file's base images, built once and kept in podman's storage.

Image registries are unreachable from our machines, so `python:3.11-slim` and `zookeeper:3.8`
cannot be pulled. We build look-alikes from Debian 12 instead: a minimal root file system made
by `debootstrap --variant=minbase` and imported into podman, then the two Containerfiles next to
this module on top of it. docker-compose.local-images.yml swaps them in for the compose test.

Each image carries a label with a key derived from everything it is built from (this module's
IMAGES_VERSION, the Debian suite, the Containerfiles): an image whose label matches is reused, so
only the first run on a machine pays (about two minutes); a changed recipe rebuilds. A file lock
keeps two test runs from building the same images at once.

`python -m tests.compose.images` builds them (`make test` does, so the test's own time stays
short); `--check` reports whether the engine can run containers at all.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "DEBIAN_IMAGE",
    "PYTHON_IMAGE",
    "ZOOKEEPER_IMAGE",
    "EngineUnavailable",
    "engine_env",
    "ensure_images",
    "require_engine",
]

HERE = Path(__file__).resolve().parent
# Bump to rebuild every image (e.g. to pick up Debian security updates).
IMAGES_VERSION = "3"
SUITE = "bookworm"
MIRROR = os.environ.get("HIGHWATER_DEBIAN_MIRROR", "http://deb.debian.org/debian")

DEBIAN_IMAGE = "localhost/highwater-test/debian:bookworm-minbase"
PYTHON_IMAGE = "localhost/highwater-test/python:3.11-slim"
ZOOKEEPER_IMAGE = "localhost/highwater-test/zookeeper:3.8"
KEY_LABEL = "io.highwater.test.recipe"

LOCK_FILE = Path(os.environ.get("HIGHWATER_IMAGES_LOCK", "/tmp/highwater-test-images.lock"))
# What `apt-get install` would otherwise add to every image: docs, man pages, translations
# (as Debian's own slim images do), and downloaded .deb files.
_DPKG_SLIM = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
"""
_APT_CLEAN = """\
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
"""
_TRIM = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/lib/apt/lists",
)

Log = Callable[[str], None]


class EngineUnavailable(Exception):
    """podman cannot run containers on this machine (the reason is the message)."""


def engine_env() -> dict[str, str]:
    """The environment every podman (and podman-compose) call of the tests runs with.

    tests/compose/containers.conf, and only it, configures the engine (runc, ulimits within
    this machine's hard limits, no systemd): nothing under /etc is changed. Images are built in
    Docker's format, as `docker build` does, so the Dockerfile's HEALTHCHECK is kept.
    """
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(HERE / "containers.conf")
    env["BUILDAH_FORMAT"] = "docker"
    return env


def podman(*args: str, timeout_s: float, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args],
        env=engine_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=check,
    )


def require_engine() -> None:
    """Raise EngineUnavailable unless podman (with runc) can start a container here."""
    if shutil.which("podman") is None:
        raise EngineUnavailable("podman is not installed (make test installs it: apt-get)")
    if not Path("/usr/sbin/runc").exists() and shutil.which("runc") is None:
        raise EngineUnavailable("runc is not installed (make test installs it: apt-get)")
    try:
        info = podman("info", "--format", "{{.Host.OCIRuntime.Name}}", timeout_s=60, check=False)
    except subprocess.TimeoutExpired:
        raise EngineUnavailable("`podman info` did not answer in 60 s") from None
    if info.returncode != 0:
        raise EngineUnavailable(f"podman does not work here: {info.stderr.strip()[-500:]}")


def _key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def recipe_keys() -> dict[str, str]:
    """The key each image must carry: a change to what it is built from changes its key."""
    debian = _key(IMAGES_VERSION, SUITE, MIRROR, _DPKG_SLIM, _APT_CLEAN, *_TRIM)
    return {
        DEBIAN_IMAGE: debian,
        PYTHON_IMAGE: _key(debian, (HERE / "python.Containerfile").read_bytes()),
        ZOOKEEPER_IMAGE: _key(
            debian,
            (HERE / "zookeeper.Containerfile").read_bytes(),
            (HERE / "zookeeper-entrypoint.sh").read_bytes(),
        ),
    }


def _current_key(image: str) -> str | None:
    found = podman(
        "image", "inspect", "--format", f'{{{{index .Labels "{KEY_LABEL}"}}}}', image,
        timeout_s=60, check=False,
    )  # fmt: skip
    return found.stdout.strip() or None if found.returncode == 0 else None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with LOCK_FILE.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(argv: list[str], log: Log, timeout_s: float) -> None:
    started = time.monotonic()
    log(f"$ {' '.join(argv)}")
    done = subprocess.run(
        argv, env=engine_env(), capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} {argv[1]} failed (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    log(f"  done in {time.monotonic() - started:.0f} s")


def _build_debian(key: str, log: Log) -> None:
    if os.geteuid() != 0:
        raise EngineUnavailable("building the Debian base image needs root (debootstrap)")
    if shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists():
        raise EngineUnavailable("debootstrap is not installed (make test installs it: apt-get)")
    with tempfile.TemporaryDirectory(prefix="highwater-debootstrap-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", SUITE, str(root), MIRROR], log, timeout_s=900)
        (root / "etc/dpkg/dpkg.cfg.d/highwater-slim").write_text(_DPKG_SLIM)
        (root / "etc/apt/apt.conf.d/highwater-clean").write_text(_APT_CLEAN)
        # Files only: directories stay (the JRE's postinst links into /usr/share/man/man1).
        for relative in _TRIM:
            for entry in (root / relative).rglob("*"):
                if entry.is_file() or entry.is_symlink():
                    entry.unlink()
        for cached in (root / "var/cache/apt").rglob("*"):
            if cached.is_file() and (cached.suffix in (".bin", ".deb")):
                cached.unlink()
        archive = Path(tmp) / "rootfs.tar"
        _run(["tar", "-C", str(root), "-cf", str(archive), "."], log, timeout_s=300)
        _run(
            [
                "podman", "import",
                "--change", f"LABEL {KEY_LABEL}={key}",
                "--change", 'CMD ["bash"]',
                str(archive), DEBIAN_IMAGE,
            ],
            log,
            timeout_s=300,
        )  # fmt: skip


def _build_from_containerfile(image: str, containerfile: str, key: str, log: Log) -> None:
    # --network host: the engine's own networks reach only loopback and each other here, and
    # apt needs Debian's mirror.
    _run(
        [
            "podman", "build", "--network", "host",
            "--build-arg", f"DEBIAN_IMAGE={DEBIAN_IMAGE}",
            "--label", f"{KEY_LABEL}={key}",
            "-f", str(HERE / containerfile), "-t", image, str(HERE),
        ],
        log,
        timeout_s=900,
    )  # fmt: skip


def ensure_images(log: Log = print) -> None:
    """Build whichever of the three images is missing or out of date (a no-op when all match)."""
    require_engine()
    keys = recipe_keys()
    with _locked():
        if _current_key(DEBIAN_IMAGE) != keys[DEBIAN_IMAGE]:
            log(f"building {DEBIAN_IMAGE} (debootstrap, about a minute)")
            _build_debian(keys[DEBIAN_IMAGE], log)
        for image, containerfile in (
            (PYTHON_IMAGE, "python.Containerfile"),
            (ZOOKEEPER_IMAGE, "zookeeper.Containerfile"),
        ):
            if _current_key(image) != keys[image]:
                log(f"building {image}")
                _build_from_containerfile(image, containerfile, keys[image], log)
    log("base images up to date: " + ", ".join(keys))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--if-engine-works",
        action="store_true",
        help="Exit 0 with a note (instead of failing) when the container engine cannot run here.",
    )
    args = parser.parse_args()
    try:
        ensure_images()
    except EngineUnavailable as exc:
        print(f"compose test images not built: {exc}", file=sys.stderr)
        return 0 if args.if_engine_works else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
