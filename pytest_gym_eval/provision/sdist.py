"""Gym's sdist: found on the package index (PEP 691 JSON simple API, PEP 503 HTML fallback), downloaded into the
cache and verified against the index's sha256, and unpacked as the checkout (top folder stripped, unsafe members
refused).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_gym_eval.core.files import file_sha256
from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.steps import Step

DEFAULT_INDEX_URL = "https://pypi.org/simple"
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool = False
    requires_python: str | None = None


def _index_url() -> str:
    for name in ("PIP_INDEX_URL", "UV_INDEX_URL"):
        value = os.environ.get(name, "").strip()
        if value:
            return value.split()[0]
    return DEFAULT_INDEX_URL


def _redact(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


def _open_url(url: str, accept: str | None, timeout: float = 60.0) -> Any:
    """urlopen with credentials from the URL's user:password moved into a Basic auth header."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "pytest-gym-eval"}
    if accept:
        headers["Accept"] = accept
    if parts.username is not None:
        credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if parts.scheme == "file":
        local = Path(urllib.request.url2pathname(parts.path))
        if local.is_dir():
            for name in ("index.json", "index.html"):
                if (local / name).is_file():
                    url = (local / name).as_uri()
                    break
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _parse_html_index(text: str, base_url: str) -> list[IndexFile]:
    from html.parser import HTMLParser
    from urllib.parse import urldefrag, urljoin

    files: list[IndexFile] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag != "a":
                return
            attributes = dict(attrs)
            href = attributes.get("href")
            if not href:
                return
            url, fragment = urldefrag(urljoin(base_url, href))
            digest = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p).get("sha256")
            name = url.rstrip("/").rsplit("/", 1)[-1]
            requires = attributes.get("data-requires-python") or None  # HTMLParser unescapes &gt;
            files.append(IndexFile(name, url, digest, None, "data-yanked" in attributes, requires))

    Parser().feed(text)
    return files


def _list_index(step: Step) -> tuple[str, list[IndexFile]]:
    from urllib.parse import urldefrag, urljoin

    index = _index_url()
    page = index.rstrip("/") + "/nemo-gym/"
    step.write(f"index page: {_redact(page)}")
    accept = f"{_SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
    try:
        with _open_url(page, accept) as response:
            body = response.read()
            content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
            final_url = response.geturl()
    except OSError as exc:
        raise ProvisionError(f"cannot read the package index page {_redact(page)}: {exc}") from exc
    text = body.decode("utf-8", "replace")
    if content_type == _SIMPLE_JSON or content_type.endswith("json") or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
            files = [
                IndexFile(
                    filename=str(f["filename"]),
                    url=urldefrag(urljoin(final_url, str(f["url"])))[0],
                    sha256=(f.get("hashes") or {}).get("sha256"),
                    size=f.get("size") if isinstance(f.get("size"), int) else None,
                    yanked=bool(f.get("yanked")),
                    requires_python=str(f["requires-python"]) if f.get("requires-python") else None,
                )
                for f in data["files"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProvisionError(f"unexpected JSON from {_redact(page)}: {exc}") from exc
    else:
        files = _parse_html_index(text, final_url)
    step.write(f"{len(files)} files listed ({content_type or 'unknown content type'})")
    return page, files


def find_sdist(version: str, step: Step) -> IndexFile:
    """The index's entry for the ``nemo-gym`` ``version`` sdist (one index request, nothing downloaded)."""
    page, files = _list_index(step)
    pattern = re.compile(rf"^nemo[-_.]gym-{re.escape(version)}\.tar\.gz$", re.I)
    matches = [f for f in files if pattern.match(f.filename)]
    if not matches:
        versions = sorted(
            {m.group(1) for f in files if (m := re.match(r"^nemo[-_.]gym-(.+)\.tar\.gz$", f.filename, re.I))}
        )
        raise ProvisionError(
            f"no sdist of nemo-gym {version} on {_redact(page)} "
            f"(sdist versions there: {', '.join(versions[-12:]) or 'none'})"
        )
    chosen = matches[0]
    if chosen.yanked:
        step.write(f"note: {chosen.filename} is yanked on the index; using it because it was asked for")
    if not chosen.sha256 or not re.fullmatch(r"[0-9a-fA-F]{64}", chosen.sha256):
        raise ProvisionError(f"the index gives no sha256 for {chosen.filename}; refusing to use it unverified")
    step.write(f"{chosen.filename}: requires-python {chosen.requires_python!r} (from the index)")
    return chosen


def download_sdist(chosen: IndexFile, sdist_dir: Path, step: Step) -> Path:
    assert chosen.sha256 is not None  # find_sdist refuses entries without one
    expected = chosen.sha256.lower()
    sdist_dir.mkdir(parents=True, exist_ok=True)
    target = sdist_dir / chosen.filename
    if target.exists():
        if file_sha256(target) == expected:
            step.write(f"using cached {target} (sha256 {expected})")
            step.log(f"pytest-gym-eval provision: [download] using cached {target}")
            return target
        step.write(f"cached {target} has the wrong sha256: downloading again")
        target.unlink()
    # Not files.write_text_atomic: the bytes stream in (MBs, never all in memory) and are renamed only once their
    # sha256 matches the index, so the rename is part of the verified download.
    part = target.with_name(f"{target.name}.part-{os.getpid()}")
    step.write(f"downloading {_redact(chosen.url)} -> {target}")
    digest = hashlib.sha256()
    try:
        with _open_url(chosen.url, None, timeout=120.0) as response, open(part, "wb") as out:
            total = chosen.size or int(response.headers.get("Content-Length") or 0) or None
            done, next_report = 0, 10
            step.log(
                f"pytest-gym-eval provision: [download] {chosen.filename}"
                + (f" ({total / 1e6:.1f} MB)" if total else "")
            )
            while chunk := response.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if total and done * 100 >= next_report * total:
                    percent = min(100, done * 100 // total)
                    line = f"[download] {done / 1e6:.1f} / {total / 1e6:.1f} MB ({percent}%)"
                    step.write(line)
                    step.log(f"pytest-gym-eval provision: {line}")
                    next_report = percent // 10 * 10 + 10
        actual = digest.hexdigest()
        step.write(f"downloaded {done} bytes, sha256 {actual}")
        if actual != expected:
            raise ProvisionError(
                f"sha256 mismatch for {chosen.filename}: the index says {expected}, the download has {actual}"
            )
        os.replace(part, target)
    except OSError as exc:
        raise ProvisionError(f"download of {_redact(chosen.url)} failed: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
    return target


def _unsafe_name(name: str) -> bool:
    return name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) is not None or ".." in name.split("/")


def unpack(sdist: Path, checkout: Path, step: Step) -> None:
    import tarfile

    with tarfile.open(sdist, "r:*") as tar:
        members = tar.getmembers()
        for member in members:
            if _unsafe_name(member.name) or (member.islnk() and _unsafe_name(member.linkname)):
                raise ProvisionError(f"refusing archive member {member.name!r}: absolute path or '..'")
        tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
        if len(tops) != 1:
            raise ProvisionError(f"expected one top folder in {sdist.name}, found {sorted(tops)[:5]}")
        selected = []
        for member in members:
            parts = PurePosixPath(member.name).parts
            if len(parts) <= 1:
                continue
            member.name = "/".join(parts[1:])
            if member.islnk():
                member.linkname = "/".join(PurePosixPath(member.linkname).parts[1:])
            selected.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(checkout, members=selected, filter="data")
        else:  # Python without extraction filters: refuse what the data filter would refuse
            for member in selected:
                if member.issym():
                    target = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
                    if os.path.isabs(member.linkname) or target.split(os.sep)[0] == "..":
                        raise ProvisionError(f"refusing symlink {member.name!r} -> {member.linkname!r}")
                elif not (member.isfile() or member.isdir() or member.islnk()):
                    raise ProvisionError(f"refusing special archive member {member.name!r}")
            tar.extractall(checkout, members=selected)
    step.write(f"unpacked {len(selected)} members of {sdist} into {checkout}")
