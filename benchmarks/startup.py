"""What a new user waits for: start-up, the first save, memory, the encoder, and uvx.

    .venv/bin/python benchmarks/startup.py                # everything, about 2 minutes
    .venv/bin/python benchmarks/startup.py --skip-uvx --skip-venv --runs 3
    .venv/bin/python benchmarks/startup.py --skip-uvx --skip-venv --skip-encoder --runs 7  # start-up only

Measured, each printed and written to ``benchmarks/results-startup.json``:

- spawn -> ``initialize`` answered and spawn -> first ``save_lesson`` answered, ``lore-memory
  mcp`` on a fresh SQLite file (raw JSON-RPC lines, as ``run.py`` does), beside a bare
  ``MCPServer`` (``bare_server.py``: spawn -> ``initialize``, spawn -> its first ``ping``)
  spawned in the same runs in a rotating order, and Lore's own cost, the per-run difference;
  the CPU seconds each process had used by then (steadier than the wall clock on a busy
  machine) and Lore's own, the difference again; the server's RSS right after that save (VmRSS) and its high-water mark (VmHWM).
  Median and range of ``--runs``. ``--baseline DIR`` adds the Lore of another checkout to
  every run (before and after a change, on the same machine at the same moment).
- the default encoder in this process: query p50 (distinct texts, so the cache never helps)
  and bulk lessons/s (``encode_documents`` on 2,000 synthetic lessons, every core).
- ``uvx --find-links <dist> lore-memory-mcp mcp`` from an empty uv cache: the command the
  configs use, with the wheel built from this checkout offered beside the registry, everything
  else resolved from the registry, until the first save is answered.
- a fresh virtual environment with ``pip install <wheel>``: install seconds and size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from run import RawServer, bare_command, log, lore_command, machine_info, percentiles  # noqa: E402

SAVE = {
    "name": "save_lesson",
    "arguments": {
        "problem": "pgbouncer in transaction mode breaks prepared statements",
        "resolution": "Disable prepared statements in the driver (prepare_threshold=None)",
    },
}


def rss_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a live process, in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


PING = {"name": "ping", "arguments": {}}


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system, every thread) a live process has used: unlike the wall
    clock, hardly changed by other work on a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_call(command: list[str], env: dict[str, str], errlog: Any, call: dict[str, Any]) -> dict[str, Any]:
    """Spawn a server; seconds from spawn to its ``initialize`` answer and to the answer of its
    first tool call (``save_lesson`` for Lore, ``ping`` for the bare server), and its RSS then."""
    server = RawServer(command, env, errlog, timeout_s=600)
    try:
        init_s = server.initialize()
        init_cpu = cpu_s(server.proc.pid)
        response, call_s = server.request("tools/call", call)
        if response["result"].get("isError"):
            raise RuntimeError(f"{call['name']} failed: {response['result']}")
        return {
            "initialize_s": init_s,
            "first_call_s": call_s,
            "initialize_cpu_s": init_cpu,
            "first_call_cpu_s": cpu_s(server.proc.pid),
            **rss_mb(server.proc.pid),
        }
    finally:
        server.close()


def first_save(command: list[str], env: dict[str, str], errlog: Any) -> dict[str, Any]:
    """``first_call`` of Lore's ``save_lesson``, keyed as the uvx runs report it."""
    run = first_call(command, env, errlog, SAVE)
    run["first_save_s"] = run.pop("first_call_s")
    run["first_save_cpu_s"] = run.pop("first_call_cpu_s")
    return run


def spread(samples: list[float]) -> dict[str, float]:
    """Median and range."""
    return {
        "median": round(statistics.median(samples), 3),
        "min": round(min(samples), 3),
        "max": round(max(samples), 3),
    }


def bench_cold(runs: int, workdir: Path, errlog: Any, baseline: Path | None = None) -> dict[str, Any]:
    """Lore and the bare ``MCPServer`` (and Lore from the ``baseline`` checkout, if given)
    spawned one after the other in every run, in an order that rotates, so a machine busy with
    other work slows each alike; Lore's own cost is the per-run difference from the bare server."""
    spawn = {
        "lore": lambda db: first_save(lore_command(), {"LORE_DB_PATH": str(db)}, errlog),
        "bare": lambda db: first_call(bare_command(), {}, errlog, PING),
    }
    if baseline is not None:  # the same console script, importing the other checkout's code
        env = {"PYTHONPATH": str(baseline)}
        spawn["baseline"] = lambda db: first_save(lore_command(), {"LORE_DB_PATH": str(db), **env}, errlog)
    for name, start in spawn.items():  # page cache, .pyc
        start(workdir / f"warm-{name}.db")
    samples = []
    for run in range(runs):
        names = list(spawn)
        order = names[run % len(names) :] + names[: run % len(names)]
        got = {name: spawn[name](workdir / f"cold-{name}-{run}.db") for name in order}
        bare = got.pop("bare")
        sample = {f"bare_{key}": bare[key] for key in ("initialize_s", "first_call_s")}
        sample |= {f"bare_{key}": bare[key] for key in ("initialize_cpu_s", "first_call_cpu_s")}
        for name, lore in got.items():
            sample |= {
                f"{name}_initialize_s": lore["initialize_s"],
                f"{name}_first_save_s": lore["first_save_s"],
                f"{name}_own_initialize_s": lore["initialize_s"] - bare["initialize_s"],
                f"{name}_own_first_save_s": lore["first_save_s"] - bare["first_call_s"],
                f"{name}_initialize_cpu_s": lore["initialize_cpu_s"],
                f"{name}_first_save_cpu_s": lore["first_save_cpu_s"],
                f"{name}_own_initialize_cpu_s": lore["initialize_cpu_s"] - bare["initialize_cpu_s"],
                f"{name}_own_first_save_cpu_s": lore["first_save_cpu_s"] - bare["first_call_cpu_s"],
                f"{name}_VmRSS_mb": lore["VmRSS"],
                f"{name}_VmHWM_mb": lore["VmHWM"],
            }
        sample = {key: round(value, 3) for key, value in sample.items()}
        samples.append(sample)
        log(f"  run {run + 1}: {sample}")
    summary: dict[str, Any] = {"runs": runs, "order": "rotating: " + ", ".join(spawn)}
    summary |= {key: spread([s[key] for s in samples]) for key in samples[0]}
    summary["samples"] = samples
    return summary


def bench_encoder() -> dict[str, Any]:
    from synthetic import Generator

    from lore_mcp.embedding.embedder import Embedder

    embedder = Embedder()
    started = time.perf_counter()
    embedder.wait()
    load_s = time.perf_counter() - started
    queries = [f"why does service {i} time out after the {i % 7}th deploy of the week" for i in range(300)]
    for q in queries[:10]:
        embedder.encode_query(q + " warm")
    samples = []
    for q in queries:
        t = time.perf_counter()
        embedder.encode_query(q)
        samples.append((time.perf_counter() - t) * 1000)
    texts = [f"{lesson.problem}\n{lesson.resolution}" for lesson in Generator(7).lessons(2000)]
    t = time.perf_counter()
    embedder.encode_documents(texts)
    bulk_s = time.perf_counter() - t
    return {
        "runtime": embedder.runtime,
        "load_s": round(load_s, 3),
        "query_ms": percentiles(samples),
        "bulk_lessons_per_s": round(len(texts) / bulk_s, 1),
    }


def build_wheel(out: Path) -> Path:
    uv = Path(sys.executable).with_name("uv")
    subprocess.run(
        [str(uv), "build", "--wheel", "--out-dir", str(out), str(REPO)], check=True, capture_output=True
    )
    (wheel,) = out.glob("lore_memory_mcp-*.whl")
    return wheel


def bench_uvx(wheel: Path, workdir: Path, errlog: Any) -> dict[str, Any]:
    # The tool's own environment: no PYTHONPATH, so the wheel's code is what runs.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(
        {
            "UV_CACHE_DIR": str(workdir / "uv-cache"),
            "UV_TOOL_DIR": str(workdir / "uv-tools"),
            "UV_PYTHON": sys.executable,
            "UV_NO_CONFIG": "1",
            "LORE_DB_PATH": str(workdir / "uvx.db"),
        }
    )
    uvx = str(Path(sys.executable).with_name("uvx"))
    command = [uvx, "--find-links", str(wheel.parent), "lore-memory-mcp", "mcp"]
    cold = first_save(command, env, errlog)
    warm = first_save(command, {**env, "LORE_DB_PATH": str(workdir / "uvx-2.db")}, errlog)
    for run in (cold, warm):  # the pid is uvx's, not the server's: its memory says nothing
        run.pop("VmRSS", None)
        run.pop("VmHWM", None)
    return {"empty_cache": cold, "second_start": warm}


def bench_venv(wheel: Path, workdir: Path) -> dict[str, Any]:
    venv = workdir / "venv"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True)
    install_s = time.perf_counter() - t
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    torch = (
        subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True).returncode
        == 0
    )
    return {"install_s": round(install_s, 1), "size_mb": round(size / 2**20, 1), "has_torch": torch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-uvx", action="store_true")
    parser.add_argument("--skip-venv", action="store_true")
    parser.add_argument("--skip-encoder", action="store_true")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout whose Lore runs beside this one"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results-startup.json")
    args = parser.parse_args()
    # An installed Lore runs from bytecode: let the warm-up run write it, or every spawn would
    # compile Lore's modules again and count that as start-up.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    report: dict[str, Any] = {
        "machine": machine_info(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with (
        tempfile.TemporaryDirectory(prefix="lore-startup-") as tmp,
        open(Path(tmp) / "servers.log", "w") as errlog,
    ):
        work = Path(tmp)
        log(f"cold start, {args.runs} runs")
        report["cold"] = bench_cold(args.runs, work, errlog, args.baseline)
        if not args.skip_encoder:
            log("encoder")
            report["encoder"] = bench_encoder()
        if not (args.skip_uvx and args.skip_venv):
            wheel = build_wheel(work / "dist")
            report["wheel_mb"] = round(wheel.stat().st_size / 2**20, 1)
            if not args.skip_uvx:
                log("uvx from an empty cache")
                report["uvx"] = bench_uvx(wheel, work, errlog)
            if not args.skip_venv:
                log("fresh virtual environment")
                report["venv"] = bench_venv(wheel, work)
        shutil.rmtree(work / "uv-cache", ignore_errors=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
