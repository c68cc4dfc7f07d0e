"""What every test shares: hypothesis settings that do not depend on the machine's speed."""

from hypothesis import HealthCheck, settings

# No test may fail because a machine is slow or shared (CI's is both): hypothesis's
# per-example deadline and its "input generation is slow" health check are timings, so both
# are off for every property test. Tests that set their own settings keep the rest of them.
settings.register_profile("highwater", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("highwater")
