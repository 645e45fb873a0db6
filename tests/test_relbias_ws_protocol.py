"""A model of the warp-specialized relbias kernel's synchronization (relbias/kernel_fwd_gluon_ws.py), run on the
CPU: one producer filling a ring of `stages` slots in union-tile order (a slot refilled once both consumers
released its last tile), two consumers each computing its own tiles [js, je) of the union [0, kt) and releasing the
others unread, and with turn-taking (PINGPONG) the turns of consumer 0 and 1 alternating. The Gluon kernel cannot run
in the interpreter; this model checks the protocol it implements (the same waits, releases and turns in the same
order) for every tile range, so a deadlock shows here and not as a hung GPU: the first form of the turns (counted
per consumer's own tiles) hung the H200 on a block whose second warpgroup had no query rows, and hangs here too."""

import itertools

import pytest


def _consumer_events(js, je, kt, base, turns_per_union_tile, other_turns=0):
    """The consumer's waits and signals for one work item, in program order: (tile it waits for loaded, turn it
    waits for or None, tiles it releases, whether it passes the turn). Tiles and turns are ring-global (base + j)."""
    ev = []
    turn = (lambda j: base + j) if turns_per_union_tile else (lambda j: j - js)
    for j in range(0, js):  # leading tiles it does not need
        ev.append((base + j, base + j if turns_per_union_tile else None, [base + j], turns_per_union_tile))
    if je > js:
        ev.append((base + js, turn(js), [], True))  # first tile: scores and softmax
        for j in range(js + 1, je):  # S_j and P_{j-1} V_{j-1}; then tile j - 1 released
            ev.append((base + j, turn(j), [base + j - 1], True))
        ev.append((base + je - 1, None, [base + je - 1], False))  # the last value product
    for j in range(je, kt):  # trailing tiles it does not need
        ev.append((base + j, base + j if turns_per_union_tile else None, [base + j], turns_per_union_tile))
    if not turns_per_union_tile:  # the first form: keep passing the other consumer's remaining turns
        for i in range(je - js, other_turns):
            ev.append((None, i, [], True))
    return ev


def _simulate(items, stages, pingpong, turns_per_union_tile=True):
    """items: work items in order, each (kt, (js0, je0), (js1, je1)). Returns 'ok', or 'deadlock' when no party can
    move and some are not done; asserts every tile is released exactly twice and loaded once."""
    events = [[], []]
    base = 0
    for kt, r0, r1 in items:
        for c, (js, je) in enumerate((r0, r1)):
            other = (r1[1] - r1[0]) if c == 0 else (r0[1] - r0[0])
            events[c] += _consumer_events(js, je, kt, base, turns_per_union_tile, other)
        base += kt
    total = base
    loaded, released = set(), {}
    passes = [1 if pingpong else 0, 0]  # consumer 0 takes the first turn
    pos, nxt = [0, 0], 0
    while True:
        moved = False
        if nxt < total and (nxt < stages or released.get(nxt - stages, 0) == 2):
            loaded.add(nxt)
            nxt += 1
            moved = True
        for c in (0, 1):
            while pos[c] < len(events[c]):
                tile, turn, rel, passes_turn = events[c][pos[c]]
                if tile is not None and tile not in loaded:
                    break
                if pingpong and turn is not None and passes[c] <= turn:
                    break
                for t in rel:
                    released[t] = released.get(t, 0) + 1
                if pingpong and passes_turn:
                    passes[1 - c] += 1
                pos[c] += 1
                moved = True
        if not moved:
            break
    if nxt < total or any(pos[c] < len(events[c]) for c in (0, 1)):
        return "deadlock"
    assert all(released.get(t, 0) == 2 for t in range(total)), released
    return "ok"


def _ranges(kt):
    return [(js, je) for js in range(kt + 1) for je in range(js, kt + 1)]


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("pingpong", [False, True])
def test_every_tile_range_completes(stages, pingpong):
    """Every pair of consumer ranges inside unions of 0 to 6 tiles, alone and as two work items in a row (the
    persistent grid), completes: each tile loaded once and released by both consumers."""
    for kt in range(7):
        for r0, r1 in itertools.product(_ranges(kt), repeat=2):
            assert _simulate([(kt, r0, r1)], stages, pingpong) == "ok", (kt, r0, r1)
    for (ka, kb) in ((3, 4), (5, 2)):
        for ra, rb in itertools.product(_ranges(ka), _ranges(kb)):
            items = [(ka, ra, (0, ka)), (kb, (0, kb), rb)]
            assert _simulate(items, stages, pingpong) == "ok", items


def test_the_first_form_of_the_turns_deadlocks():
    """Turns counted per consumer's own tiles: a block whose second warpgroup has no rows (it releases every tile
    unread before passing turns) deadlocks once the ring is shorter than the union, as it did on the H200."""
    item = [(4, (0, 4), (0, 0))]
    assert _simulate(item, 2, True, turns_per_union_tile=False) == "deadlock"
    assert _simulate(item, 2, True) == "ok"
    assert _simulate(item, 2, False, turns_per_union_tile=False) == "ok"  # without turns there is nothing to wait on
