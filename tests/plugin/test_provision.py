"""Tests of pytest_gym_eval.provision.

The fast tests never download Gym: they pack the stand-in sdist under tests/fake_gym_sdist/ (no dependencies,
in-tree build backend, a ``gym`` whose ``env prefetch`` only records its arguments) and serve it from a
PEP 691 index on 127.0.0.1. uv runs with UV_OFFLINE=1 throughout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.server
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from pytest_gym_eval import provision as prov
from pytest_gym_eval.cli import provision as provision_command
from pytest_gym_eval.provision import (
    GymCheckout,
    ProvisionError,
    PythonCandidate,
    choose_interpreter,
    gym_environment,
    host,
    load_checkout,
    parse_requires_python,
    python,
    python_satisfies,
    steps,
)
from pytest_gym_eval.provision.checkout import checkout_env

FAKE_SOURCE = Path(__file__).parents[1] / "fake_gym_sdist"
VERSION = "0.7.0"
ALL_STEPS = ("preflight", "download", "unpack", "python", "venv", "prefetch", "manifest")


# ---------------------------------------------------------------------------------------------------------
# requires-python and the interpreter choice


def test_parse_requires_python() -> None:
    assert parse_requires_python(">=3.13.14") == [(">=", (3, 13, 14), False)]
    assert parse_requires_python(">=3.10, <4") == [(">=", (3, 10), False), ("<", (4,), False)]
    assert parse_requires_python("==3.13.*") == [("==", (3, 13), True)]
    assert parse_requires_python("~=3.12") == [("~=", (3, 12), False)]
    for bad in ("", "3.13", ">=3.13.0rc1", ">=3.*", "===3.13.0", ">=3.10,"):
        with pytest.raises(ValueError):
            parse_requires_python(bad)


def test_requires_python_is_a_packaging_specifier_set() -> None:
    specifiers = prov.requires_python_specifiers(">=3.10, <4")
    assert specifiers == SpecifierSet(">=3.10,<4")
    assert "3.13.0" in specifiers and "4.0.0" not in specifiers
    assert prov.requires_python_specifiers("== 3.13.*") == SpecifierSet("==3.13.*")
    for bad in ("", ">=3.13.0rc1", ">=3.10.post1", ">=1!3.10", "==3.13.0+local", "===3.13.0", ">=3.10,"):
        with pytest.raises(ValueError, match="cannot parse requires-python clause"):
            prov.requires_python_specifiers(bad)


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ((3, 13, 0), ">=3.13.14", False),
        ((3, 13, 14), ">=3.13.14", True),
        ((3, 14, 0), ">=3.13.14", True),
        ((3, 12, 1), ">=3.12", True),
        ((3, 11, 7), ">=3.12", False),
        ((3, 13, 0), ">=3.10, <3.13", False),
        ((3, 12, 9), ">=3.10, <3.13", True),
        ((3, 13, 2), "==3.13.*", True),
        ((3, 12, 2), "==3.13.*", False),
        ((3, 12, 5), "~=3.12.1", True),
        ((3, 13, 0), "~=3.12.1", False),
        ((3, 13, 0), "~=3.12", True),
        ((3, 13, 0), "!=3.13.0", False),
        ((2, 7, 18), None, True),
    ],
)
def test_python_satisfies(version: tuple[int, int, int], spec: str | None, expected: bool) -> None:
    assert python_satisfies(version, spec) is expected


def _candidates(*specs: tuple[str, tuple[int, int, int]]) -> list[PythonCandidate]:
    return [PythonCandidate(Path(path), version, "test") for path, version in specs]


def test_choose_interpreter_prefers_lowest_satisfying_minor() -> None:
    found = _candidates(
        ("/py/3.14.2", (3, 14, 2)),
        ("/py/3.13.14", (3, 13, 14)),
        ("/py/3.13.20", (3, 13, 20)),
        ("/py/3.13.0", (3, 13, 0)),
    )
    choice = choose_interpreter(">=3.13.14", found)
    assert choice == (Path("/py/3.13.20"), (3, 13, 20), False, None)


def test_choose_interpreter_applies_the_workaround_with_the_newest_same_minor() -> None:
    found = _candidates(
        ("/py/3.11.7", (3, 11, 7)),
        ("/py/3.13.0", (3, 13, 0)),
        ("/py/3.13.2", (3, 13, 2)),
        ("/py/3.12.1", (3, 12, 1)),
    )
    choice = choose_interpreter(">=3.13.14", found)
    assert choice.workaround is True
    assert choice.path == Path("/py/3.13.2")
    assert choice.pretend_version == "3.13.14"


def test_choose_interpreter_no_workaround_when_the_bound_is_excluded() -> None:
    with pytest.raises(ProvisionError):
        choose_interpreter(">=3.13.14, !=3.13.14, <3.13.15", _candidates(("/py/3.13.0", (3, 13, 0))))


def test_choose_interpreter_errors_name_what_was_searched() -> None:
    found = _candidates(("/py/3.12.1", (3, 12, 1)), ("/py/3.14.0", (3, 14, 0)))
    with pytest.raises(ProvisionError) as info:
        choose_interpreter(">=3.13.14, <3.14", found, ["uv python find", "/root/.pyenv/versions/*/bin/python3"])
    message = str(info.value)
    assert ">=3.13.14, <3.14" in message
    assert "/py/3.12.1 (3.12.1)" in message and "/py/3.14.0 (3.14.0)" in message
    assert "/root/.pyenv/versions/*/bin/python3" in message
    with pytest.raises(ProvisionError, match="requires-python"):
        choose_interpreter(">=3.13.14rc1", found)


def test_choose_interpreter_without_requires_python_takes_the_newest() -> None:
    found = _candidates(("/py/2.7", (2, 7, 18)), ("/py/3.12", (3, 12, 1)), ("/py/3.11", (3, 11, 7)))
    assert choose_interpreter(None, found).path == Path("/py/3.12")


def test_read_requires_python_with_and_without_tomllib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "nemo-gym"\nrequires-python = ">=3.13.14"\n', encoding="utf-8")
    assert prov.read_requires_python(pyproject) == ">=3.13.14"
    monkeypatch.setitem(sys.modules, "tomllib", None)  # import fails as on Python 3.10
    assert prov.read_requires_python(pyproject) == ">=3.13.14"
    pyproject.write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert prov.read_requires_python(pyproject) is None


# ---------------------------------------------------------------------------------------------------------
# The stand-in sdist and a local PEP 691 index


def _uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv:
        return uv
    import uv as uv_package

    return str(uv_package.find_uv_bin())


def _build_fake_sdist(out_dir: Path, requires_python: str, version: str = VERSION) -> Path:
    root = out_dir / f"nemo_gym-{version}"
    shutil.copytree(FAKE_SOURCE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    template = root / "pyproject.toml.template"
    text = template.read_text(encoding="utf-8").replace("@VERSION@", version)
    template.unlink()
    # uv lock needs an interpreter satisfying requires-python: lock with a loose one, then set the real one.
    (root / "pyproject.toml").write_text(text.replace("@REQUIRES_PYTHON@", ">=3.8"), encoding="utf-8")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": str(out_dir / "uv-cache")}
    env["PATH"] = host.path_without_shims(env.get("PATH", ""))
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        [_uv(), "lock", "--offline", "--no-config", "--python", sys.executable],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    for name in ("pyproject.toml", "uv.lock"):
        path = root / name
        path.write_text(path.read_text(encoding="utf-8").replace('">=3.8"', f'"{requires_python}"'), "utf-8")
    # Like Gym's: a version that is installed nowhere, which breaks pyenv shims run inside the checkout.
    (root / ".python-version").write_text("3.13.14\n", encoding="utf-8")
    (root / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: nemo-gym\nVersion: {version}\n", "utf-8")
    sdist = out_dir / f"nemo_gym-{version}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    shutil.rmtree(root)
    return sdist


@pytest.fixture(scope="session")
def fake_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_fake_sdist(tmp_path_factory.mktemp("sdist"), ">=3.10")


class FakeIndex:
    """A PEP 691 simple index for nemo-gym on 127.0.0.1 that counts every request."""

    def __init__(self, sdist: Path, sha256: str | None = None, requires_python: str = ">=3.10") -> None:
        self.sdist = sdist
        self.requires_python = requires_python
        self.sha256 = sha256 or hashlib.sha256(sdist.read_bytes()).hexdigest()
        self.requests: list[str] = []
        self.accept_headers: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                index.accept_headers.append(self.headers.get("Accept", ""))
                if self.path == "/simple/nemo-gym/":
                    body = json.dumps(index.page()).encode()
                    content_type = "application/vnd.pypi.simple.v1+json"
                elif self.path == f"/files/{index.sdist.name}":
                    body, content_type = index.sdist.read_bytes(), "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def page(self) -> dict[str, Any]:
        wheel = {
            "filename": f"nemo_gym-{VERSION}-py3-none-any.whl",
            "url": "../../files/nope.whl",
            "hashes": {"sha256": "0" * 64},
        }
        sdist = {
            "filename": self.sdist.name,
            "url": f"../../files/{self.sdist.name}",
            "hashes": {"sha256": self.sha256},
            "size": self.sdist.stat().st_size,
            "requires-python": self.requires_python,
        }
        return {"meta": {"api-version": "1.1"}, "name": "nemo-gym", "files": [wheel, sdist]}

    def downloads(self) -> int:
        return sum(1 for path in self.requests if path.startswith("/files/"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cache and stand-in records under tmp_path; uv offline."""
    monkeypatch.setenv("PYTEST_GYM_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_GYM_RECORD", str(tmp_path / "record.jsonl"))
    monkeypatch.setenv("UV_OFFLINE", "1")
    for name in ("UV_INDEX_URL", "FAKE_GYM_FAIL_PREFETCH", "FAKE_GYM_HANG_FIFO", "PYTEST_GYM_EVAL_UV"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@contextlib.contextmanager
def _serve(
    monkeypatch: pytest.MonkeyPatch, sdist: Path, sha256: str | None = None, requires_python: str = ">=3.10"
) -> Iterator[FakeIndex]:
    index = FakeIndex(sdist, sha256, requires_python)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        yield index
    finally:
        index.close()


@pytest.fixture
def index(sandbox: Path, fake_sdist: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeIndex]:
    with _serve(monkeypatch, fake_sdist) as served:
        yield served


def _records(sandbox: Path) -> list[dict[str, Any]]:
    path = sandbox / "record.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _manifest(checkout: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((checkout / ".pytest-gym-eval" / "manifest.json").read_text("utf-8"))
    return data


# ---------------------------------------------------------------------------------------------------------
# Provisioning end to end with the stand-in


def test_full_provision_then_second_run_is_instant(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    checkout = prov.provision(VERSION, log=lines.append)

    path = sandbox / "cache" / f"gym-{VERSION}"
    assert checkout.path == path == prov.default_checkout_path(VERSION)
    assert checkout.gym_executable == path / ".venv" / "bin" / "gym"
    assert checkout.version == VERSION
    assert checkout.environments == ("mcqa",)
    assert index.accept_headers[0].startswith("application/vnd.pypi.simple.v1+json")
    assert index.downloads() == 1
    assert (sandbox / "cache" / "sdists" / f"nemo_gym-{VERSION}.tar.gz").exists()

    manifest = _manifest(path)
    assert manifest["gym_version"] == VERSION
    assert manifest["checkout"] == str(path)
    assert manifest["sdist"]["filename"] == f"nemo_gym-{VERSION}.tar.gz"
    assert manifest["sdist"]["sha256"] == index.sha256
    assert manifest["gym_executable"] == str(checkout.gym_executable)
    assert manifest["environments"] == ["mcqa"]
    assert manifest["python"]["workaround"] is False and manifest["python"]["pretend_version"] is None
    assert python_satisfies(tuple(int(p) for p in manifest["python"]["version"].split(".")), ">=3.10")
    assert Path(manifest["uv"]["path"]).exists() and manifest["uv"]["version"]
    assert manifest["env"]["UV_PYTHON_DOWNLOADS"] == "never"
    assert manifest["env"]["UV_CACHE_DIR"] == str(sandbox / "cache" / "uv-cache")
    assert manifest["env"]["TMPDIR"] == str(sandbox / "cache" / "tmp")
    assert manifest["created"].endswith("Z")
    assert set(manifest["step_seconds"]) >= {"download", "unpack", "python", "venv", "prefetch"}
    for step in ALL_STEPS:
        assert (path / ".pytest-gym-eval" / "logs" / f"{step}.log").exists()
        assert any(f"[{step}] started" in line for line in lines)
        assert any(f"[{step}] done in" in line for line in lines)
    assert not any(line.startswith("warning") or "warning:" in line for line in lines)

    # The stand-in gym recorded one prefetch, run in the checkout with the checkout's environment.
    (record,) = _records(sandbox)
    assert record["argv"][:4] == ["env", "prefetch", "--config", str(path / "resources_servers/mcqa/configs/mcqa.yaml")]
    assert manifest["environment_configs"] == {"mcqa": ["resources_servers/mcqa/configs/mcqa.yaml"]}
    assert "++policy_base_url=http://127.0.0.1:9/v1" in record["argv"]
    assert record["cwd"] == str(path)
    assert record["python"].startswith(str(path / ".venv"))
    first, second = record["env"]["PATH"].split(os.pathsep)[:2]
    assert Path(first, "uv").resolve() == Path(manifest["uv"]["path"]).resolve()
    assert second == str(Path(manifest["python"]["path"]).parent)
    assert record["env"]["UV_CACHE_DIR"] == str(sandbox / "cache" / "uv-cache")
    assert record["env"]["XDG_CONFIG_DIRS"] == os.environ.get("XDG_CONFIG_DIRS")

    loaded = load_checkout(path)
    assert loaded == checkout

    # Second run: no subprocess, no HTTP, fast.
    def no_subprocess(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"subprocess started: {args}")

    def no_http(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("HTTP request")

    import urllib.request

    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    monkeypatch.setattr(urllib.request, "urlopen", no_http)
    requests_before = len(index.requests)
    second_lines: list[str] = []
    start = time.monotonic()
    again = prov.provision(VERSION, log=second_lines.append)
    elapsed = time.monotonic() - start
    assert again == checkout
    assert elapsed < 1.0
    assert second_lines == []
    assert len(index.requests) == requests_before
    assert len(_records(sandbox)) == 1


def test_missing_environment_runs_only_its_prefetch(sandbox: Path, index: FakeIndex) -> None:
    dest = sandbox / "checkouts" / "gym"
    first = prov.provision(VERSION, dest, ["mcqa"], log=lambda line: None)
    assert first.path == dest
    requests_before = len(index.requests)
    lines: list[str] = []
    second = prov.provision(VERSION, dest, ["mcqa", "math_with_judge"], log=lines.append)
    assert second.environments == ("mcqa", "math_with_judge")
    assert len(index.requests) == requests_before
    records = _records(sandbox)
    assert [Path(r["argv"][3]).name for r in records] == ["mcqa.yaml", "math_with_judge.yaml"]
    assert [line for line in lines if "started" in line] == [line for line in lines if "[prefetch] started" in line]
    assert _manifest(dest)["environments"] == ["mcqa", "math_with_judge"]
    assert (sandbox / "checkouts" / "gym.lock").exists()
    assert not (dest / "gym.lock").exists()


def test_a_judge_environments_unset_model_values_are_placeholders_at_prefetch(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment whose judge is a model server of its own interpolates values nobody sets before a session
    binds the judge (``judge_base_url``, ``judge_model_name``): Gym's prefetch refuses the config until they are set,
    so provisioning sets each one it names to a placeholder, one at a time (prefetching calls no model)."""
    monkeypatch.setenv("FAKE_GYM_UNSET_VALUES", "judge_base_url,judge_model_name")
    checkout = prov.provision(VERSION, sandbox / "judge-checkout", ["mcqa"], log=lambda line: None)
    assert checkout.environments == ("mcqa",)
    argvs = [r["argv"] for r in _records(sandbox)]
    assert [argv[-2:] for argv in argvs[-1:]] == [["++judge_base_url=unused", "++judge_model_name=unused"]]
    log = (sandbox / "judge-checkout" / ".pytest-gym-eval" / "logs" / "prefetch.log").read_text()
    assert log.count("set to a placeholder") == 2


def test_a_model_server_no_config_of_the_environment_defines_is_a_placeholder_at_prefetch(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gym 0.7.0's physics_judge, math_with_autograder, inverse_if, false_statement_judge and simpleqa name a judge
    model server (``judge_model``, ``genrm_model``) that none of their configs defines: Gym's prefetch refuses the
    config, so provisioning defines each one it names at a placeholder address (prefetching calls no model)."""
    monkeypatch.setenv("FAKE_GYM_UNDEFINED_SERVERS", "judge_model,genrm_model")
    checkout = prov.provision(VERSION, sandbox / "judge-checkout", ["mcqa"], log=lambda line: None)
    assert checkout.environments == ("mcqa",)
    (*_, last) = [r["argv"] for r in _records(sandbox)]
    for name in ("judge_model", "genrm_model"):
        assert f"++{name}.responses_api_models.openai_model.openai_base_url=http://127.0.0.1:9/v1" in last
        assert f"++{name}.responses_api_models.openai_model.entrypoint=app.py" in last
    log = (sandbox / "judge-checkout" / ".pytest-gym-eval" / "logs" / "prefetch.log").read_text()
    assert log.count("set to a placeholder") == 2


def test_two_processes_at_once_build_once(sandbox: Path, index: FakeIndex) -> None:
    dest = sandbox / "shared-checkout"
    cmd = [sys.executable, "-m", "pytest_gym_eval", "provision", "--dest", str(dest)]
    cmd += ["--gym-version", VERSION]
    # Hold the lock while both start, so both must wait; then let them race for it.
    lock_fd = os.open(sandbox / "shared-checkout.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in procs:
            assert proc.stderr is not None
            first_line = proc.stderr.readline()
            assert "waiting for another provisioning process" in first_line, first_line
    finally:
        os.close(lock_fd)
    results = [proc.communicate(timeout=300) for proc in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == str(dest)
    assert len(_records(sandbox)) == 1
    assert index.downloads() == 1
    download_log = (dest / ".pytest-gym-eval" / "logs" / "download.log").read_text("utf-8")
    assert download_log.count("=== step download started") == 1
    assert load_checkout(dest).environments == ("mcqa",)
    builders = [err for _, err in results if "[download] started" in err]
    assert len(builders) == 1
    assert sum("provisioned by another process" in err for _, err in results) == 1


def test_a_pep503_html_file_index_works(sandbox: Path, fake_sdist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = sandbox / "pypi"
    (root / "simple" / "nemo-gym").mkdir(parents=True)
    (root / "files").mkdir()
    shutil.copy(fake_sdist, root / "files")
    digest = hashlib.sha256(fake_sdist.read_bytes()).hexdigest()
    (root / "simple" / "nemo-gym" / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        f'<a href="../../files/{fake_sdist.name}#sha256={digest}">{fake_sdist.name}</a>\n'
        "</body></html>\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PIP_INDEX_URL", (root / "simple").as_uri())
    checkout = prov.provision(VERSION, log=lambda line: None)
    assert _manifest(checkout.path)["sdist"]["sha256"] == digest


def test_a_failed_step_leaves_no_manifest_and_the_next_run_rebuilds(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_FAIL_PREFETCH", "1")
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, log=lambda line: None)
    error = info.value
    checkout = prov.default_checkout_path(VERSION)
    log_path = checkout / ".pytest-gym-eval" / "logs" / "prefetch.log"
    assert error.step == "prefetch"
    assert error.log_path == log_path
    assert "'prefetch'" in str(error) and str(log_path) in str(error)
    assert "FAKE_GYM_FAIL_PREFETCH is set" in str(error)  # the log's last lines
    assert not (checkout / ".pytest-gym-eval" / "manifest.json").exists()
    with pytest.raises(ProvisionError, match="half-built"):
        load_checkout(checkout)

    monkeypatch.delenv("FAKE_GYM_FAIL_PREFETCH")
    leftover = checkout.with_name(f"{checkout.name}.deleting-12345")  # an interrupted earlier delete
    leftover.mkdir()
    lines: list[str] = []
    rebuilt = prov.provision(VERSION, log=lines.append)
    assert not leftover.exists()
    assert [p.name for p in checkout.parent.iterdir() if ".deleting-" in p.name] == []
    assert any("half-built" in line and "rebuilding" in line for line in lines)
    assert any("[unpack] done" in line for line in lines)
    assert any("using cached" in line for line in lines)
    assert index.downloads() == 1
    assert len(_records(sandbox)) == 2
    assert load_checkout(checkout) == rebuilt


def test_main_reports_errors_and_returns_1(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_GYM_FAIL_PREFETCH", "1")
    assert provision_command.main(["--dest", str(sandbox / "x")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error: provision step 'prefetch' failed" in captured.err
    monkeypatch.delenv("FAKE_GYM_FAIL_PREFETCH")
    assert provision_command.main(["--dest", str(sandbox / "x"), "--environment", "mcqa", "equivalence_rule"]) == 0
    assert capsys.readouterr().out.strip() == str(sandbox / "x")
    assert load_checkout(sandbox / "x").environments == ("mcqa", "equivalence_rule")


def test_wrong_sha256_is_a_download_error(sandbox: Path, fake_sdist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _serve(monkeypatch, fake_sdist, sha256="ab" * 32) as index:
        with pytest.raises(ProvisionError) as info:
            prov.provision(VERSION, log=lambda line: None)
        assert info.value.step == "download"
        assert "download.log" in str(info.value)
        assert "sha256 mismatch" in str(info.value)
        assert index.downloads() == 1
    checkout = prov.default_checkout_path(VERSION)
    assert not (checkout / ".pytest-gym-eval" / "manifest.json").exists()
    assert list((sandbox / "cache" / "sdists").iterdir()) == []
    assert _records(sandbox) == []


def test_unsafe_sdist_members_are_refused(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evil = sandbox / "evil" / f"nemo_gym-{VERSION}.tar.gz"
    evil.parent.mkdir()
    payload = sandbox / "payload.txt"
    payload.write_text("x", encoding="utf-8")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(payload, arcname=f"nemo_gym-{VERSION}/pyproject.toml")
        tar.add(payload, arcname=f"nemo_gym-{VERSION}/../../escaped.txt")
    with _serve(monkeypatch, evil), pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, log=lambda line: None)
    assert info.value.step == "unpack"
    assert "'..'" in str(info.value)
    assert not (sandbox / "escaped.txt").exists() and not (sandbox / "cache" / "escaped.txt").exists()


def test_a_foreign_folder_is_never_deleted(sandbox: Path, index: FakeIndex) -> None:
    dest = sandbox / "my-own-gym"
    dest.mkdir()
    (dest / "precious.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(ProvisionError, match="refusing to delete"):
        prov.provision(VERSION, dest, log=lambda line: None)
    assert (dest / "precious.txt").read_text("utf-8") == "keep me"
    assert index.requests == []


def test_ctrl_c_kills_the_running_step(sandbox: Path, index: FakeIndex) -> None:
    fifo = sandbox / "gym-started.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: never blocks, never sees EOF
    env = {**os.environ, "FAKE_GYM_HANG_FIFO": str(fifo)}
    dest = sandbox / "interrupted"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_gym_eval", "provision", "--dest", str(dest)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        data = b""
        while b"\n" not in data:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the stand-in gym never started"
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                data += os.read(fd, 100)
        gym_pid = int(data.decode())
        os.kill(gym_pid, 0)  # alive
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert out == ""
    assert "[prefetch] interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.kill(gym_pid, 0)
    assert not (dest / ".pytest-gym-eval" / "manifest.json").exists()
    assert "(killed" in (dest / ".pytest-gym-eval" / "logs" / "prefetch.log").read_text("utf-8")


def test_python_version_workaround_end_to_end(
    sandbox: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only this interpreter's base Python "exists", and the stand-in wants one patch release more.
    base_python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not base_python.exists():
        pytest.skip(f"no {base_python}")
    major, minor, patch = sys.version_info[:3]
    pretend = f"{major}.{minor}.{patch + 1}"
    sdist = _build_fake_sdist(tmp_path_factory.mktemp("sdist-workaround"), f">={pretend}")
    candidate = PythonCandidate(base_python, (major, minor, patch), "test")
    monkeypatch.setattr(python, "discover_pythons", lambda *args: ([candidate], ["test"]))
    lines: list[str] = []
    with _serve(monkeypatch, sdist, requires_python=f">={pretend}"):
        checkout = prov.provision(VERSION, log=lines.append)
    warnings = [line for line in lines if "warning" in line.lower()]
    assert len(warnings) == 1
    assert pretend in warnings[0] and str(base_python) in warnings[0]
    manifest = _manifest(checkout.path)
    assert manifest["python"]["workaround"] is True
    assert manifest["python"]["pretend_version"] == pretend
    xdg = checkout.path / ".pytest-gym-eval" / "xdg"
    assert manifest["xdg_config_dir"] == str(xdg)
    assert f'python-version = "{pretend}"' in (xdg / "uv" / "uv.toml").read_text("utf-8")
    assert checkout.env["XDG_CONFIG_DIRS"].split(os.pathsep)[0] == str(xdg)
    (record,) = _records(sandbox)
    assert record["env"]["XDG_CONFIG_DIRS"].split(os.pathsep)[0] == str(xdg)
    venv_log = (checkout.path / ".pytest-gym-eval" / "logs" / "venv.log").read_text("utf-8")
    assert f"--python-version {pretend}" in venv_log
    assert "uv export" not in venv_log or "--no-emit-project" in venv_log


# ---------------------------------------------------------------------------------------------------------
# Environments: their configs are found as Gym finds them, whatever they are named


def test_config_servers_reads_each_server_of_a_config() -> None:
    text = (FAKE_SOURCE / "resources_servers/equivalence_rule/configs/lc.yaml").read_text("utf-8")
    assert prov.config_servers(text) == [
        ("lc_equivalence_rule", "resources_servers", "equivalence_rule"),
        ("lc_equivalence_rule_simple_agent", "responses_api_agents", "simple_agent"),
    ]
    four_spaces = (FAKE_SOURCE / "resources_servers/format_verification/configs/citation_format.yaml").read_text()
    assert [kind for _, kind, _ in prov.config_servers(four_spaces)] == ["resources_servers", "responses_api_agents"]
    helper = (FAKE_SOURCE / "resources_servers/format_verification/configs/judge_model.yaml").read_text("utf-8")
    assert prov.config_servers(helper) == [("judge_model", "responses_api_models", "openai_model")]
    assert prov.config_servers("a: 1\nb:\n  - x\n") == []


def test_environment_configs_are_found_as_gym_finds_them(tmp_path: Path) -> None:
    configs = FAKE_SOURCE / "resources_servers"
    assert prov.environment_configs(FAKE_SOURCE, "mcqa") == (configs / "mcqa/configs/mcqa.yaml",)
    # Not named after its folder: the one config that defines a resources server.
    assert prov.environment_configs(FAKE_SOURCE, "equivalence_rule") == (configs / "equivalence_rule/configs/lc.yaml",)
    # Several flavors: all of them, the helper config (no resources server) left out.
    assert prov.environment_configs(FAKE_SOURCE, "format_verification") == (
        configs / "format_verification/configs/citation_format.yaml",
        configs / "format_verification/configs/freeform_formatting.yaml",
    )
    # Gym's own name for one flavor.
    assert prov.environment_configs(FAKE_SOURCE, "format_verification/citation_format") == (
        configs / "format_verification/configs/citation_format.yaml",
    )
    with pytest.raises(ProvisionError) as info:
        prov.environment_configs(FAKE_SOURCE, "format_verification/nope")
    assert "format_verification/citation_format, format_verification/freeform_formatting" in str(info.value)
    with pytest.raises(ProvisionError, match=r"did you mean mcqa\?"):
        prov.environment_configs(FAKE_SOURCE, "mcq")
    # An environment of Gym's environments/ folder.
    (tmp_path / "environments" / "calendar").mkdir(parents=True)
    (tmp_path / "environments" / "calendar" / "config.yaml").write_text("calendar: {}\n", encoding="utf-8")
    assert prov.environment_configs(tmp_path, "calendar") == (tmp_path / "environments/calendar/config.yaml",)
    (tmp_path / "resources_servers" / "helpers" / "configs").mkdir(parents=True)
    (tmp_path / "resources_servers" / "helpers" / "configs" / "judge.yaml").write_text("judge: {}\n", "utf-8")
    with pytest.raises(ProvisionError, match="no config in resources_servers/helpers/configs defines a resources"):
        prov.environment_configs(tmp_path, "helpers")


def test_environments_not_named_after_their_config_are_prefetched(sandbox: Path, index: FakeIndex) -> None:
    lines: list[str] = []
    checkout = prov.provision(VERSION, environments=["equivalence_rule", "format_verification"], log=lines.append)
    configs = checkout.path / "resources_servers"
    prefetched = [r["argv"] for r in _records(sandbox)]
    assert [argv[:4] for argv in prefetched] == [
        ["env", "prefetch", "--config", str(configs / "equivalence_rule/configs/lc.yaml")],
        ["env", "prefetch", "--config", str(configs / "format_verification/configs/citation_format.yaml")],
        ["env", "prefetch", "--config", str(configs / "format_verification/configs/freeform_formatting.yaml")],
    ]
    assert checkout.environments == ("equivalence_rule", "format_verification")
    assert _manifest(checkout.path)["environment_configs"] == {
        "equivalence_rule": ["resources_servers/equivalence_rule/configs/lc.yaml"],
        "format_verification": [
            "resources_servers/format_verification/configs/citation_format.yaml",
            "resources_servers/format_verification/configs/freeform_formatting.yaml",
        ],
    }
    assert any(
        "[prefetch] equivalence_rule ready (resources_servers/equivalence_rule/configs/lc.yaml)" in line
        for line in lines
    )
    # Adding one flavor by Gym's own name to the existing checkout prefetches that config alone.
    again = prov.provision(VERSION, environments=["format_verification/citation_format"], log=lambda line: None)
    assert again.environments == ("equivalence_rule", "format_verification", "format_verification/citation_format")
    assert [Path(r["argv"][3]).name for r in _records(sandbox)[3:]] == ["citation_format.yaml"]


def test_an_unknown_environment_is_reported_before_any_venv_is_built(sandbox: Path, index: FakeIndex) -> None:
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, environments=["mcqa", "mcq", "format_verification/nope"], log=lambda line: None)
    assert info.value.step == "unpack"
    message = str(info.value)
    assert "'mcq'" in message and "did you mean mcqa" in message and "'format_verification/nope'" in message
    checkout = prov.default_checkout_path(VERSION)
    assert not (checkout / ".venv").exists()
    assert _records(sandbox) == []
    # On a provisioned checkout too: nothing runs, the manifest stays as it was.
    prov.provision(VERSION, log=lambda line: None)
    before = _manifest(checkout)
    with pytest.raises(ProvisionError, match="'nope'") as info:
        prov.provision(VERSION, environments=["nope"], log=lambda line: None)
    assert info.value.step == "prefetch"
    assert _manifest(checkout) == before
    assert len(_records(sandbox)) == 1


def test_an_environment_needing_git_is_refused_before_any_venv_when_git_is_missing(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "git" else which(name, *a, **k))
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, environments=["git_server"], log=lambda line: None)
    assert info.value.step == "unpack"
    assert "missing tool: git" in str(info.value)
    assert "resources_servers/git_server/requirements.txt" in str(info.value)
    assert not (prov.default_checkout_path(VERSION) / ".venv").exists()
    monkeypatch.setattr(shutil, "which", which)
    assert prov.provision(VERSION, environments=["git_server"], log=lambda line: None).environments == ("git_server",)


# ---------------------------------------------------------------------------------------------------------
# What provisioning needs is reported before anything is downloaded


def test_missing_uv_is_reported_before_any_index_request(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = sandbox / "empty"
    empty.mkdir()
    monkeypatch.setitem(sys.modules, "uv", None)  # the uv package is not installed
    monkeypatch.setenv("PATH", str(empty))  # nor uv on PATH
    monkeypatch.setenv("PYENV_ROOT", str(empty))  # nor in a pyenv version
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, log=lambda line: None)
    assert info.value.step == "preflight"
    assert "uv not found" in str(info.value)
    assert "pip install 'pytest-gym-eval[provision]'" in str(info.value)
    assert index.requests == []


def test_no_usable_python_is_reported_before_the_download(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = PythonCandidate(Path("/py/3.9.18"), (3, 9, 18), "test")
    monkeypatch.setattr(python, "discover_pythons", lambda *args: ([old], ["where the test looked"]))
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, log=lambda line: None)
    assert info.value.step == "preflight"
    assert "no Python satisfies requires-python '>=3.10'" in str(info.value)
    assert "/py/3.9.18 (3.9.18)" in str(info.value) and "where the test looked" in str(info.value)
    assert index.requests == ["/simple/nemo-gym/"]  # the index page says what Python the sdist needs
    assert index.downloads() == 0


def test_a_uv_too_old_for_the_python_workaround_is_reported_before_the_download(
    sandbox: Path, fake_sdist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    near = PythonCandidate(Path("/py/3.13.0"), (3, 13, 0), "test")
    monkeypatch.setattr(python, "discover_pythons", lambda *args: ([near], ["test"]))
    monkeypatch.setattr(python, "uv_version", lambda *args: (0, 10, 7))
    with _serve(monkeypatch, fake_sdist, requires_python=">=3.13.14") as index:
        with pytest.raises(ProvisionError) as info:
            prov.provision(VERSION, log=lambda line: None)
        assert index.downloads() == 0
    assert info.value.step == "preflight"
    assert "uv 0.10.7" in str(info.value) and ">= 0.10.8" in str(info.value) and "3.13.14" in str(info.value)


def test_a_platform_gym_cannot_run_on_is_reported_before_anything_else(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert prov.platform_problem() is None
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(ProvisionError, match="runs NeMo Gym on Linux only, and this is 'win32'"):
        prov.provision(VERSION, log=lambda line: None)
    with pytest.raises(ProvisionError, match="Linux only"):
        load_checkout(sandbox)
    assert index.requests == []
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setitem(sys.modules, "fcntl", None)
    assert prov.platform_problem() == (
        "pytest-gym-eval cannot run NeMo Gym with this Python: fcntl is unavailable (Gym runs on Linux, with the "
        "POSIX modules). Tests without a Gym dataset are not affected"
    )


# ---------------------------------------------------------------------------------------------------------
# load_checkout and gym_environment


def test_load_checkout_rejects_what_is_no_checkout(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError) as info:
        load_checkout(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert "python -m pytest_gym_eval provision" in str(info.value)
    (tmp_path / "nemo_gym").mkdir()
    with pytest.raises(ProvisionError, match=r"\.venv/bin/gym"):
        load_checkout(tmp_path)


def test_load_checkout_accepts_a_users_own_clone(tmp_path: Path) -> None:
    (tmp_path / "nemo_gym").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "gym").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "nemo-gym"\ndynamic = ["version"]\nrequires-python = ">=3.13.14"\n', "utf-8"
    )
    (tmp_path / "nemo_gym" / "package_info.py").write_text(
        'MAJOR = 0\nMINOR = 7\nPATCH = 1\nPRE_RELEASE = "rc2"\n', encoding="utf-8"
    )
    checkout = load_checkout(tmp_path)
    assert checkout == GymCheckout(tmp_path, tmp_path / ".venv" / "bin" / "gym", "0.7.1rc2", {}, ())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "nemo-gym"\nversion = "0.4.0"\n', "utf-8")
    assert load_checkout(tmp_path).version == "0.4.0"


def test_gym_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("SOME_USER_SETTING", "kept")
    checkout = GymCheckout(
        tmp_path, tmp_path / "gym", "0.7.0", {"UV_CACHE_DIR": "/c", "TMPDIR": str(tmp_path / "t")}, ()
    )
    env = gym_environment(checkout, tmp_path / "run")
    assert env["RAY_TMPDIR"] == str(tmp_path / "run") and (tmp_path / "run").is_dir()
    assert (tmp_path / "t").is_dir()
    assert env["UV_CACHE_DIR"] == "/c"
    assert env["SOME_USER_SETTING"] == "kept"
    assert "VIRTUAL_ENV" not in env
    for key, value in {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONUNBUFFERED": "1",
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    }.items():
        assert env[key] == value


def test_a_provisioned_checkout_caches_bytecode_whatever_the_caller_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    provisioned = GymCheckout(tmp_path, tmp_path / "gym", "0.7.0", checkout_env({"env": {"TMPDIR": "/t"}}), ())
    assert gym_environment(provisioned, tmp_path / "run")["PYTHONDONTWRITEBYTECODE"] == ""
    # A user's own checkout (no manifest: no env of its own) keeps the caller's setting.
    own = GymCheckout(tmp_path, tmp_path / "gym", "0.7.0", {}, ())
    assert gym_environment(own, tmp_path / "run")["PYTHONDONTWRITEBYTECODE"] == "1"


def test_default_checkout_path_respects_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PYTEST_GYM_EVAL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert prov.default_checkout_path("0.5.1") == tmp_path / "xdg" / "pytest-gym-eval" / "gym-0.5.1"
    monkeypatch.setenv("PYTEST_GYM_EVAL_CACHE", str(tmp_path / "elsewhere"))
    assert prov.default_checkout_path() == tmp_path / "elsewhere" / f"gym-{prov.DEFAULT_GYM_VERSION}"


def test_the_plugin_finds_an_agents_config_whatever_it_is_named() -> None:
    from pytest_gym_eval.gym.run import find_agent_config

    configs = FAKE_SOURCE / "resources_servers"
    lc = configs / "equivalence_rule/configs/lc.yaml"
    assert find_agent_config(FAKE_SOURCE, "lc_equivalence_rule_simple_agent") == lc
    assert lc in prov.environment_configs(FAKE_SOURCE, "equivalence_rule")
    assert find_agent_config(FAKE_SOURCE, "lc_equivalence_rule_simple_agent", "equivalence_rule") == lc
    citation = configs / "format_verification/configs/citation_format.yaml"
    assert find_agent_config(FAKE_SOURCE, "citation_format_simple_agent", "format_verification") == citation
    # A resources_server setting may name one flavor as Gym does.
    assert find_agent_config(FAKE_SOURCE, "citation_format_simple_agent", "format_verification/citation_format") == (
        citation
    )
    assert (
        find_agent_config(FAKE_SOURCE, "citation_format_simple_agent", "format_verification/freeform_formatting")
        is None
    )


def test_every_environment_is_prepared_and_each_failure_quotes_its_error_line(
    sandbox: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    # format_verification's citation_format config fails Gym's config check; Gym then logs 20 more lines, so
    # the log's last lines alone would not show the error.
    monkeypatch.setenv("FAKE_GYM_FAIL_PREFETCH_CONFIG", "citation_format")
    lines: list[str] = []
    envs = ["equivalence_rule", "format_verification", "mcqa"]
    with pytest.raises(ProvisionError) as info:
        prov.provision(VERSION, environments=envs, log=lines.append)
    message = str(info.value)
    assert info.value.step == "prefetch"
    assert message.splitlines()[:2] == [
        "provision step 'prefetch' failed for 1 environment:",
        "  format_verification: `" + message.splitlines()[1].split("`")[1] + "` exited with status 1",
    ]
    assert "ValidationError: 1 validation error for ServerConfig" in message
    assert "Input should be a valid integer" in message  # pydantic's reason, on the line after
    assert "shutting down helper" not in message
    assert "ready nonetheless: equivalence_rule, mcqa" in message
    # The environment after the failed one was prepared too, and the ready ones are in the manifest.
    assert [Path(r["argv"][3]).name for r in _records(sandbox)] == [
        "lc.yaml",
        "citation_format.yaml",
        "mcqa.yaml",
    ]
    checkout = prov.default_checkout_path(VERSION)
    assert load_checkout(checkout).environments == ("equivalence_rule", "mcqa")
    assert any("[prefetch] format_verification failed: pydantic_core" in line for line in lines)


def test_error_lines_pick_the_line_stating_the_error() -> None:
    log = "$ gym env prefetch\nTraceback (most recent call last):\n  File x\nKeyError: 'port'\n(exit status 1)\n"
    assert prov.error_lines(log) == ["KeyError: 'port'"]
    assert prov.error_lines("all good\n(exit status 2)\n") == []


def test_a_failed_steps_error_quotes_the_line_stating_the_error_above_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "venv.log"
    noise = [f"  cleaning up {n}" for n in range(20)]
    log.write_text("\n".join(["$ uv pip install", "error: Failed to build `ray==2.58`", *noise, "error: `uv` x"]))
    message = str(steps.step_error("venv", log, "`uv pip install` exited with status 2"))
    assert "  the error:\n    error: Failed to build `ray==2.58`" in message
    assert message.index("the error:") < message.index("last lines of the log:")


def test_a_checkout_whose_venv_python_is_gone_is_rebuilt(sandbox: Path, index: FakeIndex) -> None:
    # A CI cache restored onto a runner whose Python moved (3.13.N -> 3.13.N+1): the venv's interpreter link
    # dangles. The checkout must not be taken as ready, or every later run fails naming the wrong file.
    checkout = prov.provision(VERSION, log=lambda line: None)
    python = checkout.gym_executable.with_name("python")
    assert python.is_symlink()
    python.unlink()
    python.symlink_to(checkout.path.parent / "gone" / "python3.13")
    with pytest.raises(ProvisionError, match=r"interpreter .*gone/python3\.13.* is missing"):
        load_checkout(checkout.path)
    lines: list[str] = []
    rebuilt = prov.provision(VERSION, log=lines.append)
    assert any("half-built" not in line and "interpreter" in line and "rebuilding" in line for line in lines), lines
    assert rebuilt.gym_executable.with_name("python").resolve().exists()
    assert index.downloads() == 1  # the cached sdist is used again
