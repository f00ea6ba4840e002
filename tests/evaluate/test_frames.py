"""The one framing of every hop between the evaluator's processes: each typed record survives a
round trip, and a malformed frame is refused with its cause, never half-read."""

from __future__ import annotations

import socket

import pytest

from htam.evaluate import channel, frames
from htam.evaluate import server_frames as sf
from htam.evaluate.eval_config import Tolerance
from htam.evaluate.host.watchdog import JobOutcome
from htam.evaluate.sandbox.cgroups import Group
from htam.evaluate.sandbox.isolation import Limits, Plan
from htam.status import Status

TIMING = frames.TimingSettings(
    warmup_ms=1.0, timing_budget_ms=2.0, min_timed=3, max_timed=4, l2_flush_mb=5
)
FIGURES = frames.TimingFigures(
    median_ms=1.5, min_ms=1.0, max_ms=2.0, iqr_ms=0.2, trials=10, method="perf_counter"
)
ESCAPE = frames.Escape(
    clock_ms=1.0,
    reported_ms=0.9,
    escaped_ms=0.01,
    paired_excess_ms=0.0,
    candidate_hidden_ms=0.1,
    reference_hidden_ms=0.09,
    hidden_medians_ms=(0.1, 0.1),
    slack_ms=0.05,
    busy_probes=0,
    rounds=10,
)
JOB = frames.Job(
    kind="judge",
    device="cpu",
    env={"A": "1"},
    seeds=[1, 2],
    timing=TIMING,
    task_source="class Model: ...",
    tolerances={"float32": Tolerance(rtol=1e-3, atol_scale=1e-3, rel_l2=1e-2)},
    candidate=frames.RunnerInfo(uid=7, pid=8, by_uid=True),
    runner=frames.RunnerInfo(uid=9, pid=10, by_uid=False),
)
VERDICT = frames.Verdict(
    status=Status.OK,
    timing=FIGURES,
    paired_reference=FIGURES,
    escape=ESCAPE,
    compile_s=1.0,
    marks={"built": 2.0},
    notes=["retimed"],
)
REPORTS = [
    frames.Stage(stage="reference", run_s=31.0),
    frames.Cost(flops=10, bytes=20, dtypes=["float32"]),
    frames.Probed(device="cpu", torch="2.11"),
    frames.Peaks(peaks={"device": "cpu", "bandwidth_gbs": 10.0}),
    frames.ReferenceRan(
        status=Status.OK,
        timing=FIGURES.model_copy(update={"elapsed_s": 3.0, "wall_median_ms": 1.6}),
    ),
    frames.Built(status=Status.COMPILE_ERROR, message="no compiler"),
    VERDICT,
    frames.Verdict(status=Status.RUNTIME_ERROR, message="the task", infrastructure=True),
]


@pytest.mark.parametrize("record", REPORTS, ids=lambda r: f"{r.type}")
def test_every_report_to_the_host_survives_a_round_trip(record):
    assert frames.decode(frames.encode(record), frames.REPORT) == record


def test_the_server_and_its_children_records_survive_a_round_trip():
    cand = frames.CandidateJob(code="x = 1", language="cpp", device="cpu", preload="/p")
    records = [
        (sf.Config(workroot="/w", warm_cuda=True, limits=Limits(memory_bytes=1 << 30)), sf.CONFIG),
        (sf.StartJudge(job=JOB, log="/w/log"), sf.START),
        (sf.StartCandidate(job=cand), sf.START),
        (sf.Wait(pid=3, timeout=5.0), sf.REQUEST),
        (sf.Ready(plan=Plan(True, True, True, cgroup="cgroup v2", missing=("a",))), sf.REPLY),
        (sf.Started(pid=4, uid=5, dir="/w/job1", by_uid=True, group=Group(2, ("/g",))), sf.REPLY),
        (sf.Waited(status=-9), sf.REPLY),
    ]
    for record, kind in records:
        assert frames.decode(frames.encode(record), kind) == record


def test_the_judges_requests_survive_a_round_trip():
    for request in (
        channel.Model(config=0, init_args=[1, [2.0, None]], seed=3),
        channel.Buffers(config=1, inputs=[{"value": 2}], outputs=[{"shape": [2]}], grad_outputs=1),
        channel.Call(key=(1 << 63) - 1),
        channel.Exit(),
    ):
        assert frames.decode(frames.encode(request), channel.REQUEST) == request


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        (frames.HEADER.pack(5) + b"{}", "a frame of 2 bytes announced as 5"),
        (b"\x00\x00", "shorter than its header"),
        (frames.HEADER.pack(3) + b"{no", "undecodable frame"),
        (frames.HEADER.pack(2) + b"[]", "malformed message"),
        (frames.HEADER.pack(1 << 30) + b"{}", "at most"),
    ],
)
def test_a_malformed_frame_is_refused_with_its_cause(frame, said):
    with pytest.raises(frames.FrameError, match=said):
        frames.decode(frame, frames.REPORT)


def test_a_record_of_another_shape_is_refused():
    def framed(payload: bytes) -> bytes:
        return frames.HEADER.pack(len(payload)) + payload

    for payload in (
        b'{"type":"verdict","status":"ok","forged":1}',  # a field no verdict has
        b'{"type":"verdict","status":"great"}',  # no such status
        b'{"type":"verdict"}',  # no status
        b'{"type":"stage","stage":"built","run_s":"long"}',
        b'{"type":"nothing"}',
    ):
        with pytest.raises(frames.FrameError, match="malformed message"):
            frames.decode(framed(payload), frames.REPORT)


def test_a_stream_yields_whole_frames_only():
    data = bytearray(b"".join(frames.encode(r) for r in REPORTS[:3]))
    cut = frames.encode(REPORTS[3])
    data += cut[:-1]
    assert frames.split(data, frames.REPORT) == REPORTS[:3]
    assert bytes(data) == cut[:-1]  # the cut frame waits for the rest of it
    data += cut[-1:]
    assert frames.split(data, frames.REPORT) == [REPORTS[3]] and not data


def test_a_candidate_cannot_send_a_verdict_or_a_trusted_record():
    """The candidate's replies decode into its own closed set: a verdict, a stage or a request
    of the judge's written to its channel is refused, whatever else it holds."""
    for record in (VERDICT, frames.Stage(stage="built"), channel.Call(key=1)):
        with pytest.raises(channel.ChannelError, match="malformed message"):
            channel.parse(frames.encode(record)[frames.HEADER.size :])


def test_a_candidate_frame_over_its_bound_is_refused_before_it_is_read():
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(frames.HEADER.pack(frames.MAX_FRAME + 1))  # nothing of the body follows
        with pytest.raises(channel.ChannelError, match="at most"):
            channel.recv(ours, 1.0, channel.CANDIDATE)
        theirs.sendall(frames.encode({"type": "done", "ms": 1.0, "seals": [3]}))
        done, _ = channel.recv(ours, 1.0, channel.CANDIDATE)
        assert done == channel.Done(ms=1.0, seals=[3])
    finally:
        ours.close()
        theirs.close()


def test_the_host_reads_the_last_result_and_the_verdict_typed():
    outcome = JobOutcome(frames=[frames.Stage(stage="built"), frames.Cost(flops=1, bytes=2,
                                 dtypes=[]), VERDICT])  # fmt: skip
    assert outcome.result is VERDICT and outcome.verdict is VERDICT
    assert outcome.verdict.status is Status.OK and outcome.verdict.escape == ESCAPE
    probe = JobOutcome(frames=[frames.Probed(device="cpu")])
    assert probe.verdict is None and probe.result == frames.Probed(device="cpu")
