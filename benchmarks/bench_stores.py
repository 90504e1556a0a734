"""Benchmark of the S3 clients loaderkit could read shards with, on one local S3 server.

Everything is served by moto's S3 server on 127.0.0.1 (started here, in this process's
threads, so the server's own speed is part of every figure, the same for each client). Two
workloads, each reading the same bytes with every client:

- **ranges**: 64 range GETs of 1 MiB each, spread over one 64 MiB object (what a Parquet or
  WebDataset reader asks for: row groups, tar members);
- **whole**: 16 whole-object GETs of 4 MiB (what a shard cache downloads).

Clients: ``loaderkit`` (``loaderkit.storage.S3Store``: boto3, a thread pool of
``max_in_flight=16``, every answer checked), ``boto3-serial`` (one plain boto3 GET after the
other: what one worker of a peer does) and ``obstore`` (its ``get_ranges`` for the ranges and
``get_async`` under asyncio for whole objects; skipped where obstore is not installed). Every
figure is MiB/s, the median over alternating rounds (5; 3 with ``--quick``); each client's
bytes are compared with the object's, so a fast wrong answer cannot win.

Run it as ``python benchmarks/bench_stores.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`. No target: the figures are the reason for the client choice in
``docs/storage.md``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from loaderkit.storage import RangeRequest, store_for
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.storage import RangeRequest, store_for

MiB = 1 << 20
RANGES = 64
RANGE_BYTES = 1 * MiB
WHOLE = 16
WHOLE_BYTES = 4 * MiB
CREDENTIALS = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench"}


def unavailable() -> str | None:
    """Why this benchmark cannot run here (moto's server or boto3 missing), else ``None``."""
    for module in ("moto.server", "boto3"):
        try:
            __import__(module)
        except ImportError:
            return f"needs {module.split('.')[0]} (pip install 'loaderkit[bench]')"
    return None


def _server() -> tuple[Any, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def _fill(endpoint: str) -> tuple[str, bytes, dict[str, bytes]]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS)
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    big = os.urandom(RANGES * RANGE_BYTES)
    client.put_object(Bucket=bucket, Key="big.bin", Body=big)
    wholes = {f"shard-{i:02}.bin": os.urandom(WHOLE_BYTES) for i in range(WHOLE)}
    for key, data in wholes.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    return bucket, big, wholes


def _starts() -> list[int]:
    """64 range starts spread over the big object (a stride, not in order)."""
    return [((i * 37) % RANGES) * RANGE_BYTES for i in range(RANGES)]


def _loaderkit(endpoint: str, bucket: str) -> dict[str, Callable[[], list[bytes]]]:
    store = store_for(
        f"s3://{bucket}/big.bin",
        {"endpoint_url": endpoint, "region": "us-east-1", "max_in_flight": 16, **CREDENTIALS},
    )
    big = f"s3://{bucket}/big.bin"
    ranges = [RangeRequest(big, s, s + RANGE_BYTES) for s in _starts()]
    wholes = [RangeRequest(f"s3://{bucket}/shard-{i:02}.bin") for i in range(WHOLE)]
    return {"ranges": lambda: store.read_many(ranges), "whole": lambda: store.read_many(wholes)}


def _serial(endpoint: str, bucket: str) -> dict[str, Callable[[], list[bytes]]]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS)

    def get(key: str, header: str | None = None) -> bytes:
        extra = {"Range": header} if header else {}
        data: bytes = client.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()
        return data

    return {
        "ranges": lambda: [get("big.bin", f"bytes={s}-{s + RANGE_BYTES - 1}") for s in _starts()],
        "whole": lambda: [get(f"shard-{i:02}.bin") for i in range(WHOLE)],
    }


def _obstore(endpoint: str, bucket: str) -> dict[str, Callable[[], list[bytes]]] | None:
    try:
        import obstore
        from obstore.store import S3Store
    except ImportError:
        return None
    store = S3Store(
        bucket,
        endpoint=endpoint,
        region="us-east-1",
        access_key_id=CREDENTIALS["aws_access_key_id"],
        secret_access_key=CREDENTIALS["aws_secret_access_key"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    starts = _starts()

    def ranges() -> list[bytes]:
        ends = [s + RANGE_BYTES for s in starts]
        return [bytes(b) for b in obstore.get_ranges(store, "big.bin", starts=starts, ends=ends)]

    async def _wholes() -> list[bytes]:
        async def one(i: int) -> bytes:
            result = await obstore.get_async(store, f"shard-{i:02}.bin")
            return bytes(await result.bytes_async())

        return list(await asyncio.gather(*(one(i) for i in range(WHOLE))))

    return {"ranges": ranges, "whole": lambda: asyncio.run(_wholes())}


def main(quick: bool = False) -> dict[str, float]:
    """Print the table of MiB/s per client and workload; return the figures."""
    rounds = 3 if quick else 5
    server, endpoint = _server()
    try:
        bucket, big, wholes = _fill(endpoint)
        expected = {
            "ranges": [big[s : s + RANGE_BYTES] for s in _starts()],
            "whole": [wholes[f"shard-{i:02}.bin"] for i in range(WHOLE)],
        }
        clients = {
            "loaderkit": _loaderkit(endpoint, bucket),
            "boto3-serial": _serial(endpoint, bucket),
        }
        obs = _obstore(endpoint, bucket)
        if obs is not None:
            clients["obstore"] = obs
        times: dict[tuple[str, str], list[float]] = {}
        for workload in ("ranges", "whole"):
            for name, runs in clients.items():  # warm-up: connections, and a correctness check
                assert runs[workload]() == expected[workload], f"{name} read wrong bytes"
            for _ in range(rounds):
                for name, runs in clients.items():
                    start = time.perf_counter()
                    runs[workload]()
                    times.setdefault((name, workload), []).append(time.perf_counter() - start)
    finally:
        server.stop()
    figures: dict[str, float] = {}
    total = {"ranges": RANGES * RANGE_BYTES / MiB, "whole": WHOLE * WHOLE_BYTES / MiB}
    print(f"{'client':<14}{'64 x 1 MiB ranges':>20}{'16 x 4 MiB whole':>20}   (MiB/s, median)")
    for name in clients:
        row = []
        for workload in ("ranges", "whole"):
            rate = total[workload] / statistics.median(times[(name, workload)])
            figures[f"{name}:{workload}_mib_s"] = rate
            row.append(f"{rate:>20.0f}")
        print(f"{name:<14}{''.join(row)}")
    if obs is None:
        print("(obstore not installed: pip install obstore for its row)")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
