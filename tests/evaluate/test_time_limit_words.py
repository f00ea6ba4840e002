"""A job over its time limit names the limit it ran over: the build's is fixed, and only the
run's is raised with --timeout-s (a build killed under --timeout-s 5 said "build 300 s")."""

from htam.evaluate.host.watchdog import _over_time


def test_a_build_over_its_limit_does_not_send_the_user_to_timeout_s():
    said = _over_time(301.0, "during the build", built=False, build_s=300.0, run_s=5.0)
    assert said == "time limit during the build: the build ran over its 300 s (301 s)"
    assert "--timeout-s" not in said


def test_a_run_over_its_limit_names_the_run_s_limit_alone():
    said = _over_time(45.0, "in the run phase", built=True, build_s=300.0, run_s=5.0)
    assert said == "time limit in the run phase: 45 s (the run after the build: 5 s; raise with --timeout-s)"
    assert "300" not in said
