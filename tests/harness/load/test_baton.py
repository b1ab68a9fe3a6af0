"""Arms measured at once take turns: one burst each, in ABBA order; an arm that ends early gives
its turns up so the others never wait for it, and tears down only when the others are done."""

import asyncio
import gc
import threading

from harness.load.baton import Baton, holder, turn
from harness.load.frozen_gc import frozen_gc


def test_turns_go_in_order_then_reversed():
    assert [holder(k, ["base", "head"]) for k in range(6)] == [
        "base", "head", "head", "base", "base", "head",
    ]  # fmt: skip
    assert [holder(k, ["a", "b", "c"]) for k in range(6)] == ["a", "b", "c", "c", "b", "a"]


def drive(baton: Baton, name: str, units: int, log: list, fail_after: int | None = None):
    async def run():
        for i in range(units):
            if fail_after is not None and i == fail_after:
                raise RuntimeError("server gone")
            async with turn(baton, name) as waited:
                assert waited >= 0
                log.append(name)
                await asyncio.sleep(0.01)

    try:
        asyncio.run(run())
    except RuntimeError:
        pass
    finally:
        baton.finish(name)


def run_arms(baton: Baton, plans: dict[str, tuple[int, int | None]]) -> list[str]:
    log: list[str] = []
    threads = [
        threading.Thread(target=drive, args=(baton, n, units, log, fail))
        for n, (units, fail) in reversed(plans.items())  # started in the other order
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    return log


def test_two_arms_alternate_abba_whatever_thread_starts_first():
    baton = Baton(["base", "head"])
    log = run_arms(baton, {"base": (4, None), "head": (4, None)})
    assert log == ["base", "head", "head", "base", "base", "head", "head", "base"]
    assert baton.taken == log


def test_an_arm_that_ends_early_leaves_the_others_their_turns():
    baton = Baton(["base", "head"])
    log = run_arms(baton, {"base": (4, 1), "head": (4, None)})
    assert log == ["base", "head", "head", "head", "head"]


def test_an_arm_done_with_its_turns_waits_for_the_others_before_it_tears_down():
    baton = Baton(["base", "head"])
    events: list[str] = []

    def arm(name: str, units: int) -> None:
        drive(baton, name, units, events)
        baton.wait_all()  # what run_arm does before stopping its server
        events.append(f"{name} stops")

    threads = [threading.Thread(target=arm, args=a) for a in (("base", 1), ("head", 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert events[:5] == ["base", "head", "head", "head", "head"]  # base ran out of turns first
    assert sorted(events[5:]) == ["base stops", "head stops"]  # and stopped only after head


def test_the_collector_comes_back_only_when_the_last_phase_leaves():
    assert gc.isenabled()
    with frozen_gc():  # one arm's phase
        with frozen_gc():  # another arm's, in another thread of the same process
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first arm's phase is still timed
    assert gc.isenabled()


def test_without_a_baton_a_turn_waits_for_nothing():
    async def body():
        async with turn(None, "base") as waited:
            return waited

    assert asyncio.run(body()) == 0.0
