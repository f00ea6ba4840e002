"""The fixture table: every cheat and fault with the status it must get and the rule that must
catch it (a substring of the evaluator's message)."""

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
RELU = "level1/1_ReLU.py"  # a builtin task
TINY = FIXTURES / "tiny_task.py"

# (solution file, task, language, status, message substring)
CHEATS_CPU = [
    ("cheat_zeros.py", TINY, "triton", "incorrect", "relative L2 error"),
    ("cheat_return_input.py", RELU, "triton", "rejected", "aliases an input"),
    ("cheat_mutate_input.py", RELU, "triton", "rejected", "modified its inputs"),
    ("cheat_cache_output.py", RELU, "triton", "incorrect", "trial 1"),
    (
        "cheat_kept_out_buffer.py",
        RELU,
        "triton",
        "rejected",
        "shares storage with an output of the call before",
    ),
    ("cheat_call_reference.py", RELU, "triton", "rejected", "[reference-call]"),
    # a broken kernel hidden by a fallback to torch: the kernel probe sees the call and
    # outputs that are torch's
    ("cheat_try_except.py", RELU, "triton", "rejected", "do not come from the solution's kernels"),
    ("cheat_patch_time.py", RELU, "triton", "rejected", "[timer-patch]"),
    ("cheat_patch_event.py", RELU, "triton", "rejected", "[timer-patch]"),
    ("cheat_slow_reference.py", RELU, "triton", "rejected", "[timer-patch]"),
    ("cheat_thread.py", RELU, "triton", "rejected", "[threads]"),
    ("cheat_gc.py", RELU, "triton", "rejected", "[introspection]"),
    ("cheat_wrong_dtype.py", RELU, "triton", "incorrect", "dtype"),
    ("attack_dtype_through_slot.py", RELU, "triton", "rejected", "less than float32"),
    ("attack_dtype_sprinkled.py", RELU, "triton", "rejected", "less than float32"),
    ("cheat_wrong_shape.py", RELU, "triton", "incorrect", "shape"),
    ("cheat_hardwired_shape.py", RELU, "triton", "incorrect", "trial 3"),
    ("cheat_tensor_subclass.py", RELU, "triton", "rejected", "[lazy-tensor]"),
    ("cheat_print_verdict.py", RELU, "triton", "incorrect", "elements outside"),
    ("cheat_forge_channel.py", RELU, "triton", "rejected", "result channel tampered"),
]
CHEATS_GPU = [
    ("cheat_side_stream.py", RELU, "cuda", "rejected", "escaped the timed stream"),
]
# Outcomes that refuse a cheat as well as its rule does. The side stream's kernel races the
# judge's comparison on the caller's stream: when it loses (a GPU shared by twelve test
# evaluators, H100), the output read there is unfinished, which is wrong for any caller.
ALSO_REFUSED = {"cheat_side_stream.py": ("incorrect", "elements outside")}
FAULTS_CPU = [
    ("fault_infinite_loop.py", RELU, "triton", "timeout", "time limit"),
    ("fault_host_memory.py", RELU, "triton", "runtime_error", "host memory"),
    ("fault_output_flood.py", RELU, "triton", "runtime_error", "output flood"),
    ("fault_exception.py", RELU, "triton", "runtime_error", "the candidate gave up"),
    ("fault_compile_error.py", RELU, "cpp", "compile_error", "this_function_does_not_exist"),
    ("fault_segfault.py", RELU, "cpp", "runtime_error", "signal 11"),
]
FAULTS_GPU = [
    ("fault_illegal_memory.py", RELU, "cuda", "runtime_error", "illegal memory access"),
]
HONEST_CPU = [("honest_relu_triton.py", RELU, "triton"), ("honest_relu_cpp.py", RELU, "cpp")]
HONEST_GPU = [("honest_relu_cuda.py", RELU, "cuda"), ("honest_relu_triton.py", RELU, "triton")]
