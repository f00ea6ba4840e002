"""The red team's table (issue 16, item 5): every attack fixture, the class it belongs to, and
what the evaluator must make of it.

``expect`` is a list of (status, message substring) pairs, any one of which is the right
outcome; ``ok`` means the attack achieved nothing (the fixture then computes the right answer
honestly) and the containment checks of tests/evaluate/test_attacks.py decide. ``hole`` is set
where the attack got through when the table was written (the test is then a strict xfail that
says what happened, so the fix shows up as an XPASS).
"""

from dataclasses import dataclass
from pathlib import Path

from tests.evaluate.cases import FIXTURES, RELU


@dataclass(frozen=True)
class Attack:
    fixture: str
    cls: str
    language: str
    expect: tuple[tuple[str, str], ...]
    hole: str | None = None
    # not ok, or ok at no more than this times the honest Triton candidate's speedup (timing
    # attacks whose fallback is honest)
    max_speedup_vs_honest: float | None = None
    # not ok, or ok at no more than this speedup (C++ candidates, timed for real)
    max_speedup: float | None = None
    task: str | Path = RELU


OK = (("ok", ""),)
# An honest C++ kernel beside a contained attack: ok, or (on a loaded 2-core machine) rejected by
# the escape check, whose 0.3 ms slack the judge's clock overruns there (a false positive of
# the check, reported; never an unearned ok).
OK_OR_ESCAPE = OK + (("rejected", "escaped the timed stream"),)
# A contained reading attack whose host loop takes raw pointers (integers, not tensors): where the
# kernel probe does not find the tensor behind a pointer it is refused as torch's work
# (docs/evaluator.md, "The kernel requirement"); what matters here is that it read nothing.
RAW_POINTERS = OK_OR_ESCAPE + (("rejected", "[no-kernel]"),)

MMAP_RELU = FIXTURES / "relu_mmap_task.py"

ATTACKS_CPU = [
    # ---------------------------------------------------------------- forged verdict / channel
    Attack(
        "attack_forge_wrong_type.py",
        "forged verdict",
        "triton",
        (("rejected", "result channel tampered"),),
    ),
    Attack("attack_huge_frame.py", "forged verdict", "triton", (("rejected", "announced"),)),
    Attack("attack_malformed_json.py", "forged verdict", "triton", (("rejected", "undecodable"),)),
    Attack(
        "attack_forge_verdict.py",
        "forged verdict",
        "triton",
        (("rejected", "result channel tampered"),),
    ),
    Attack(
        "attack_done_before_compute.py",
        "forged verdict",
        "triton",
        (("rejected", ""), ("incorrect", "")),
    ),
    # ---------------------------------------------------------------- timing in the candidate
    Attack(
        "attack_predict_inputs.py",
        "timing",
        "triton",
        (("rejected", "escaped the timed stream"),) + OK,
        max_speedup_vs_honest=3.0,
    ),
    Attack(
        "attack_late_fill_thread.py",
        "timing",
        "triton",
        (("incorrect", ""), ("rejected", "")),
    ),
    Attack(
        "attack_cpp_late_fill.py",
        "timing",
        "cpp",
        (("incorrect", ""), ("rejected", "")),
    ),
    Attack(  # red team: helpers that resume themselves (a SIGCONT timer) after every stop
        "attack_cpp_self_resume.py",
        "timing",
        "cpp",
        (("rejected", "ran while the judge had it stopped"),),
    ),
    Attack(  # red team: a late answer nudged to match the weighted-sum seal of the returned one
        "attack_cpp_seal_forge.py",
        "timing",
        "cpp",
        (("rejected", "changed after the call returned"),),
    ),
    Attack(
        "attack_shrink_buffer.py",
        "timing",
        "triton",
        (("rejected", ""), ("runtime_error", "candidate")),
    ),
    Attack("attack_resize_input.py", "timing", "triton", (("incorrect", "trial"),)),
    # ---------------------------------------------------------------- slowing the reference
    Attack("attack_burner_reforking.py", "slowing the reference", "triton", OK),
    Attack("attack_cpp_patch_torch.py", "slowing the reference", "cpp", OK_OR_ESCAPE),
    # ---------------------------------------------------------------- patching the harness
    # the dispatcher's CPU kernels of equal, allclose, isclose and dot replaced (and torch.equal,
    # torch.allclose from pybind11) beside an answer of zeros: the judge's comparison is its own
    Attack("attack_cpp_dispatch_override.py", "patching the judge", "cpp", (("incorrect", ""),)),
    Attack(
        "attack_patch_harness_send.py",
        "patching the harness",
        "triton",
        (("rejected", "escaped"),) + OK,
        max_speedup_vs_honest=3.0,
    ),
    Attack(
        "attack_cpp_forge_timer.py",
        "patching the harness",
        "cpp",
        (("rejected", "escaped"),) + OK,
        max_speedup=10.0,
    ),
    Attack(
        "attack_reference_fallback.py",
        "patching the harness",
        "triton",
        (("rejected", "no-kernel"),),
    ),
    # ---------------------------------------------------------------- reading what it must not
    Attack("attack_read_proc.py", "reading", "triton", OK),
    Attack("attack_read_files.py", "reading", "triton", OK),
    Attack("attack_keyring_timers.py", "escaping", "triton", OK),
    Attack("attack_memfd_hoard.py", "escaping", "triton", OK),
    Attack("attack_sysv_hoard.py", "escaping", "triton", OK),
    Attack("attack_iouring.py", "escaping", "triton", OK),
    # red team 6: a namespace of its own (a tmpfs outside the limits), the 32-bit ABI (numbers
    # the filter did not know: a socket, a key, memfd and io_uring)
    Attack("attack_userns_tmpfs.py", "escaping", "triton", OK),
    Attack("attack_cpp_int80.py", "escaping", "cpp", (("runtime_error", "SIGSYS"),)),
    Attack(
        "attack_socketpair_hoard.py",
        "escaping",
        "triton",
        (("compile_error", "Permission denied"),),
    ),
    Attack(
        "attack_netlink_hoard.py",
        "escaping",
        "triton",
        (("compile_error", "Permission denied"),),
    ),
    Attack("attack_cpp_ancestors.py", "reading", "cpp", RAW_POINTERS),
    # red team 10: pipe buffers, kernel memory in no resident set (2.4 GB under 1 GiB)
    Attack("attack_pipe_hoard.py", "escaping", "triton", (("runtime_error", "host memory"),)),
    Attack("attack_host_proc_argv.py", "reading", "triton", OK),
    # keystrokes into the operator's terminal (TIOCSTI): no terminal is in its reach
    Attack("attack_tiocsti.py", "escaping", "triton", OK),
    # attack_symlink_build_cache.py has its own test (two runs)
    # ---------------------------------------------------------------- escaping
    Attack("attack_spawn_setsid.py", "escaping", "triton", OK),
    Attack("attack_write_outside.py", "escaping", "triton", OK),
    Attack(
        "attack_connect_out.py",
        "escaping",
        "triton",
        OK + (("compile_error", "Permission denied"),),  # no socket may be made at all
    ),
    Attack("attack_fill_tmp.py", "escaping", "triton", OK),
    Attack(
        "attack_unlink_log.py",
        "escaping",
        "triton",
        (("runtime_error", "replaced its output log"),),
    ),
    Attack(
        "attack_cpp_escape.py",
        "escaping",
        "cpp",
        OK_OR_ESCAPE,
    ),
    # ---------------------------------------------------------------- attacking the evaluator
    Attack("attack_kill_evaluator.py", "attacking the evaluator", "triton", OK),
    # red team 12: a time of NaN drops every floor that min() and max() take; the host's job
    # folders (the reference runner's, other evaluations') and shared mappings, read
    Attack("attack_nan_time.py", "forged timing", "cpp", (("rejected", "malformed"),)),
    # with the job directory a tmpfs of its own, mountinfo names its root "/" and no host path:
    # the fixture then walks the whole (read-only) filesystem and floods its log
    Attack(
        "attack_read_sibling_jobs.py",
        "reading",
        "cpp",
        OK_OR_ESCAPE + (("runtime_error", "output flood"),),
    ),
    Attack("attack_shared_maps.py", "reading", "cpp", OK_OR_ESCAPE),
    # stopped by the watchdog's disk check, or (when the job ends first) removed all the same
    Attack(
        "attack_deep_tree.py",
        "attacking the evaluator",
        "triton",
        (("runtime_error", "nested deeper than 64"),) + OK,
    ),
    # attack_disk_unlinked.py and attack_inode_flood.py: tests/evaluate/test_limits.py (lower
    # limits)
    # (attack_huge_frame.py and attack_malformed_json.py above belong here too)
    # ---------------------------------------------------------------- the next prompt
    # bidirectional overrides, zero-width and tag characters, line separators in the log and in
    # an exception's message (every result is also checked for them: test_attacks._no_harm)
    Attack(
        "attack_unicode_controls.py",
        "the next prompt",
        "triton",
        (("runtime_error", "htam-unicode"),),
    ),
    # ---------------------------------------------------------------- stopping the run
    # every call's time reported as exactly 0, on a call shorter than the clock's resolution
    Attack(
        "attack_zero_time.py",
        "stopping the run",
        "cpp",
        # or, where the judge's clock puts a floor above 0 under it, escaped work or a bounded ok
        (("rejected", "median time is 0 ms"), ("rejected", "escaped")) + OK,
        max_speedup=10.0,
    ),
    # a sum of 695 terms (Python runs it): the host's static check ran past the recursion limit
    Attack("attack_deep_expression.py", "stopping the run", "triton", (("rejected", "nested"),)),
    # ---------------------------------------------------------------- poisoning later runs
    Attack("attack_poison_cache.py", "poisoning", "triton", OK),
    # ---------------------------------------------------------------- kept outputs
    # (outputs of 64 MB, above glibc's largest mmap threshold: a fresh one is a fresh mapping)
    # a pool of outputs written ahead, one handed over a call (2.2x against 1x, CPU)
    Attack(
        "cheat_prefaulted_pool.py",
        "kept outputs",
        "cpp",
        (("rejected", "resident before the call"),),
        task=MMAP_RELU,
    ),
    # rotated buffers with glibc keeping freed blocks resident, so that the harness's renewal
    # takes the same pages back (5.2x against 0.95x, CPU): the free heap given back before each
    # call leaves them fresh pages (ok at the honest kernel's speed), or the rule refuses them
    Attack(
        "cheat_rotated_heap.py",
        "kept outputs",
        "cpp",
        (("rejected", "resident before the call"),) + OK,
        max_speedup=3.0,
        task=MMAP_RELU,
    ),
    # red team 18: the harness's rules on kept outputs live in the candidate's process. A kept
    # buffer with them switched off through __builtins__' setattr (5.4x against 1x), and the
    # judge's lent slot written in place on every call (4.9x): the judge reads the process's
    # anonymous memory over the call itself (judge/fresh_pages.py)
    Attack(
        "attack_cpu_kept_patched.py",
        "kept outputs",
        "cpp",
        (("rejected", "resident before the call"),),
        task=MMAP_RELU,
    ),
    Attack(
        "attack_cpu_slot_resident.py",
        "kept outputs",
        "cpp",
        (("rejected", "resident before the call"),),
        task=MMAP_RELU,
    ),
    # the check's bound: half the output's faults, made in throwaway memory by a native thread
    # on the other core while the call computes into a kept buffer (ok at 0.8x and 1.8x
    # against the honest kernel's 1.1x on a loaded 2-core machine)
    Attack(
        "attack_cpu_kept_throwaway.py",
        "kept outputs",
        "cpp",
        (("rejected", "resident before the call"),) + OK,
        max_speedup=3.0,
        task=MMAP_RELU,
    ),
    # ---------------------------------------------------------------- the kernel requirement
    # torch does the work, gated on its own kernel's result (1.0): the probe's NaN closes the
    # gate, so the outputs "depend" on the kernel (docs/evaluator.md, "What it cannot see")
    Attack(
        "attack_gate_kernel.py",
        "the kernel requirement",
        "triton",
        (("rejected", "no-kernel"),),
        hole="torch's work gated on a kernel's result passes the kernel probe (ok)",
    ),
]

# GPU-only classes, for the lead's H200 run (task level1/1_ReLU.py at size large), and the CPU
# containment fixtures again on the GPU machine.
ATTACKS_GPU = [
    Attack(
        "attack_gpu_late_fill.py",
        "timing",
        "cuda",
        (("incorrect", ""), ("rejected", "")),
    ),
    Attack("attack_gpu_ipc_scan.py", "reading", "cuda", (("runtime_error", ""), ("incorrect", ""))),
    Attack("attack_read_proc.py", "reading", "triton", OK),
    Attack("attack_cpp_ancestors.py", "reading", "cuda", RAW_POINTERS),
    Attack("attack_spawn_setsid.py", "escaping", "triton", OK),
    Attack("attack_sysv_hoard.py", "escaping", "triton", OK),
    Attack("attack_iouring.py", "escaping", "triton", OK),
    Attack(
        "attack_socketpair_hoard.py",
        "escaping",
        "triton",
        (("compile_error", "Permission denied"),),
    ),
    Attack(
        "attack_netlink_hoard.py",
        "escaping",
        "triton",
        (("compile_error", "Permission denied"),),
    ),
    Attack("attack_kill_evaluator.py", "attacking the evaluator", "triton", OK),
    Attack(
        "attack_zero_time_triton.py",
        "stopping the run",
        "triton",
        (("rejected", "median time is"), ("rejected", "escaped")) + OK,
    ),
    Attack("attack_deep_expression.py", "stopping the run", "triton", (("rejected", "nested"),)),
    Attack(
        "attack_unicode_controls.py",
        "the next prompt",
        "triton",
        (("runtime_error", "htam-unicode"),),
    ),
    # (the NaN time, sibling-job and shared-map attacks are C++ candidates for the CPU list: a
    # C++ solution does not run on target cuda, which the H100 said of them)
    # the reference's runner out of GPU memory beside it: the candidate's failure, not the task's
    Attack(
        "attack_gpu_memory_hog.py",
        "attacking the evaluator",
        "triton",
        # or its own allocation fails when a neighbour (another test's evaluator) took memory
        # between its query and its request: a CUDA error of its own, which the H100 showed
        OK + (("runtime_error", "runs alone"), ("runtime_error", "CUDA out of memory")),
    ),
]
