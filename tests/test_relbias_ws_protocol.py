"""A model of the warp-specialized relbias kernel's synchronization (relbias/kernel_fwd_gluon_ws.py), run on the
CPU: one producer filling a ring of `stages` slots in union-tile order (a slot refilled once both consumers
released its last tile), two consumers each computing its own tiles [js, je) of the union [0, kt) and releasing the
others unread, and with turn-taking (PINGPONG) the turns of consumer 0 and 1 alternating. The Gluon kernel cannot run
in the interpreter; this model checks the protocol it implements (the same waits, releases and turns in the same
order) for every tile range, so a deadlock shows here and not as a hung GPU: the first form of the turns (counted
per consumer's own tiles) hung the H200 on a block whose second warpgroup had no query rows, and hangs here too."""

import itertools

import pytest


def _consumer_events(js, je, kt, base, turns_per_union_tile, other_turns=0, krel=False):
    """The consumer's waits and signals for one work item, in program order: (key tile and value tile it waits for
    loaded, turn it waits for or None, arrivals, whether it passes the turn). An arrival is ("empty", t) (the slot of
    tile t; with krel its value slot) or ("kempty", t) (krel: its key slot). Tiles and turns are ring-global
    (base + j)."""
    ev = []
    turn = (lambda j: base + j) if turns_per_union_tile else (lambda j: j - js)

    def unread(j):  # a tile it does not need: waited for, released (turn taken in the second form)
        rel = [("kempty", base + j), ("empty", base + j)] if krel else [("empty", base + j)]
        return (base + j, base + j, base + j if turns_per_union_tile else None, rel, turns_per_union_tile)

    ev += [unread(j) for j in range(0, js)]
    if je > js:
        ev.append((base + js, None, turn(js), [("kempty", base + js)] if krel else [], True))  # first tile: S only
        for j in range(js + 1, je):  # S_j and P_{j-1} V_{j-1}; key tile j (krel) and tile j - 1 released
            rel = ([("kempty", base + j)] if krel else []) + [("empty", base + j - 1)]
            ev.append((base + j, base + j - 1, turn(j), rel, True))
        ev.append((None, base + je - 1, None, [("empty", base + je - 1)], False))  # the last value product
    ev += [unread(j) for j in range(je, kt)]
    if not turns_per_union_tile:  # the first form: keep passing the other consumer's remaining turns
        ev += [(None, None, i, [], True) for i in range(je - js, other_turns)]
    return ev


def _simulate(items, stages, pingpong, turns_per_union_tile=True, krel=False):
    """items: work items in order, each (kt, (js0, je0), (js1, je1)). Returns 'ok', or 'deadlock' when no party can
    move and some are not done; asserts every slot is released by both consumers before it is refilled (the
    producer's rule) and every tile's slots exactly twice in the end."""
    events = [[], []]
    base = 0
    for kt, r0, r1 in items:
        for c, (js, je) in enumerate((r0, r1)):
            other = (r1[1] - r1[0]) if c == 0 else (r0[1] - r0[0])
            events[c] += _consumer_events(js, je, kt, base, turns_per_union_tile, other, krel)
        base += kt
    total = base
    arrivals = {"empty": {}, "kempty": {}}
    k_loaded, v_loaded = set(), set()
    passes = [1 if pingpong else 0, 0]  # consumer 0 takes the first turn
    pos, nk, nv = [0, 0], 0, 0
    free = lambda bar, t: t < 0 or arrivals[bar].get(t, 0) == 2  # noqa: E731  slot of tile t released by both
    while True:
        moved = False
        # the producer, in order: key tile nk, then its value tile
        if nk < total and nk == nv and free("kempty" if krel else "empty", nk - stages):
            k_loaded.add(nk)
            nk += 1
            moved = True
        if nv < nk and free("empty", nv - stages):
            v_loaded.add(nv)
            nv += 1
            moved = True
        for c in (0, 1):
            while pos[c] < len(events[c]):
                kt_, vt_, turn, rel, passes_turn = events[c][pos[c]]
                if (kt_ is not None and kt_ not in k_loaded) or (vt_ is not None and vt_ not in v_loaded):
                    break
                if pingpong and turn is not None and passes[c] <= turn:
                    break
                for bar, t in rel:
                    arrivals[bar][t] = arrivals[bar].get(t, 0) + 1
                if pingpong and passes_turn:
                    passes[1 - c] += 1
                pos[c] += 1
                moved = True
        if not moved:
            break
    if nv < total or any(pos[c] < len(events[c]) for c in (0, 1)):
        return "deadlock"
    assert all(arrivals["empty"].get(t, 0) == 2 for t in range(total)), arrivals
    assert all(arrivals["kempty"].get(t, 0) == (2 if krel else 0) for t in range(total)), arrivals
    return "ok"


def _ranges(kt):
    return [(js, je) for js in range(kt + 1) for je in range(js, kt + 1)]


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("krel", [False, True])
def test_every_tile_range_completes(stages, pingpong, krel):
    """Every pair of consumer ranges inside unions of 0 to 6 tiles, alone and as two work items in a row (the
    persistent grid), completes: each tile loaded once and released by both consumers (with gluon_k_release its key
    and value slots apart)."""
    for kt in range(7):
        for r0, r1 in itertools.product(_ranges(kt), repeat=2):
            assert _simulate([(kt, r0, r1)], stages, pingpong, krel=krel) == "ok", (kt, r0, r1)
    for (ka, kb) in ((3, 4), (5, 2)):
        for ra, rb in itertools.product(_ranges(ka), _ranges(kb)):
            items = [(ka, ra, (0, ka)), (kb, (0, kb), rb)]
            assert _simulate(items, stages, pingpong, krel=krel) == "ok", items


def test_the_first_form_of_the_turns_deadlocks():
    """Turns counted per consumer's own tiles: a block whose second warpgroup has no rows (it releases every tile
    unread before passing turns) deadlocks once the ring is shorter than the union, as it did on the H200."""
    item = [(4, (0, 4), (0, 0))]
    assert _simulate(item, 2, True, turns_per_union_tile=False) == "deadlock"
    assert _simulate(item, 2, True) == "ok"
    assert _simulate(item, 2, False, turns_per_union_tile=False) == "ok"  # without turns there is nothing to wait on
