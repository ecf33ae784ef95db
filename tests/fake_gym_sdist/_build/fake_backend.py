"""Minimal in-tree PEP 517/660 build backend for the stand-in nemo-gym (no build dependencies)."""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name_version() -> tuple[str, str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M)
    version = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    assert name and version, "pyproject.toml lacks name or version"
    return name.group(1), version.group(1)


def _write_wheel(wheel_directory: str, files: dict[str, bytes]) -> str:
    name, version = _name_version()
    dist = re.sub(r"[-_.]+", "_", name)
    distinfo = f"{dist}-{version}.dist-info"
    files = dict(files)
    files[f"{distinfo}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nProvides-Extra: dev\n"
    ).encode()
    files[f"{distinfo}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: fake_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{distinfo}/entry_points.txt"] = b"[console_scripts]\ngym = nemo_gym.cli:main\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{distinfo}/RECORD,,")
    files[f"{distinfo}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory, wheel_name), "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel_name


def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: object = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    files = {
        f"nemo_gym/{path.name}": path.read_bytes() for path in sorted((ROOT / "nemo_gym").glob("*.py"))
    }
    return _write_wheel(wheel_directory, files)


def build_editable(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    return _write_wheel(wheel_directory, {"_nemo_gym_stand_in.pth": f"{ROOT}\n".encode()})
