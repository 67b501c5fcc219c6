"""The host clock of an eager call (repro_studies.evidence.timing.host_us): what it counts, and where it waits.

Nothing is timed for a result here; the fake clock and device only record the order of events."""

from repro_studies.evidence import timing


def test_each_round_starts_on_an_idle_device_and_the_clock_sees_only_the_calls(monkeypatch):
    events = []
    ticks = iter(range(0, 10_000, 5))  # every read of the clock 5 us later, as seconds * 1e-6
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(ticks) * 1e-6)
    per_call = timing.host_us(lambda: events.append("call"), calls=4, rounds=3, sync=lambda: events.append("sync"))
    warm = max(1, 4 // 10)
    assert events[:warm] == ["call"] * warm
    rounds = events[warm:]
    assert rounds == (["sync"] + ["call"] * 4) * 3 + ["sync"]  # a wait before every round, and after the last
    assert per_call == 5 / 4  # one clock read before and one after each round's 4 calls
