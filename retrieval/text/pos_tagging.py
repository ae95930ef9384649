"""jieba's part-of-speech tagger with the same tags, faster: entity extraction (entities.py) spent
~85 % of a Chinese document's time in jieba.posseg's HMM (`viterbi`, run on every run of
characters its dictionary does not cover), which tries every previous state for every state of
every character. `FastPOSTokenizer` is `jieba.posseg.POSTokenizer` with that step replaced by
`viterbi` below — the same recursion, the same additions in the same order, the same tie rule, so
the same path — looking only at the previous states that can move to each state, and remembering
the path of each run it has tagged (the same names recur across documents).
"""

from __future__ import annotations

import functools

import jieba.posseg
from jieba.posseg import char_state_tab_P, emit_P, pair, start_P, trans_P

MIN_FLOAT = -3.14e100  # jieba.posseg.viterbi's score of an emission it has no probability for
CACHE_RUNS = 1 << 16  # runs of characters whose path is remembered (a run is a few characters)

_NO_SCORE = float("-inf")
_MOVES = {state: frozenset(moves) for state, moves in trans_P.items()}
# state → {previous state that can move to it: log probability of that move}
_INTO: dict[tuple, dict[tuple, float]] = {}
for _previous, _moves in trans_P.items():
    for _state, _p in _moves.items():
        _INTO.setdefault(_state, {})[_previous] = _p


@functools.lru_cache(maxsize=CACHE_RUNS)
def viterbi(obs: str) -> tuple[tuple, ...]:
    """The most likely (position, part of speech) state of each character of `obs`, as
    `jieba.posseg.viterbi.viterbi(obs, char_state_tab_P, start_P, trans_P, emit_P)` finds it.

    Its step scores state y at t as max over previous states y0 of (V[t-1][y0] + trans(y0→y) +
    emit(y, obs[t]), y0), with -inf for a move trans_P does not have. Every state y it scores can
    be reached from some y0 (y is drawn from the states the previous ones move to), and every V
    is finite (start_P and emit_P have no -inf), so a missing move never wins: the maximum over
    the y0 that move to y, with the same sums and ties broken by the larger y0, is the same."""
    all_states = trans_P.keys()
    scores = {y: start_P[y] + emit_P[y].get(obs[0], MIN_FLOAT) for y in char_state_tab_P.get(obs[0], all_states)}
    back: list[dict] = [dict.fromkeys(scores, "")]
    for char in obs[1:]:
        previous = [x for x in back[-1] if trans_P[x]]
        expected = set().union(*[_MOVES[x] for x in previous])
        states = set(char_state_tab_P.get(char, all_states)) & expected or expected or all_states
        step_scores, step_back = {}, {}
        for y in states:
            emit = emit_P[y].get(char, MIN_FLOAT)
            into = _INTO.get(y, {})
            best, best_from = _NO_SCORE, None  # every real score is finite (docstring)
            if len(into) < len(previous):  # the shorter side: the order does not matter, ties are ruled
                for y0, move in into.items():
                    before = scores.get(y0)
                    if before is not None:
                        score = before + move + emit
                        if score > best or (score == best and y0 > best_from):
                            best, best_from = score, y0
            else:
                for y0 in previous:
                    move = into.get(y0)
                    if move is not None:
                        score = scores[y0] + move + emit
                        if score > best or (score == best and y0 > best_from):
                            best, best_from = score, y0
            if best_from is None:  # only when no previous state moves anywhere: jieba's max() of nothing
                raise ValueError(f"no path through {obs!r}")
            step_scores[y], step_back[y] = best, best_from
        scores = step_scores
        back.append(step_back)
    state = max((v, y) for y, v in scores.items())[1]
    route = [None] * len(obs)
    for i in range(len(obs) - 1, -1, -1):
        route[i] = state
        state = back[i][state]
    return tuple(route)


class FastPOSTokenizer(jieba.posseg.POSTokenizer):
    """`jieba.posseg.POSTokenizer` whose HMM step is `viterbi` above (module doc)."""

    def _POSTokenizer__cut(self, sentence):  # overrides POSTokenizer.__cut (name-mangled)
        pos_list = viterbi(sentence)
        begin, nexti = 0, 0
        for i, char in enumerate(sentence):
            pos = pos_list[i][0]
            if pos == "B":
                begin = i
            elif pos == "E":
                yield pair(sentence[begin:i + 1], pos_list[i][1])
                nexti = i + 1
            elif pos == "S":
                yield pair(char, pos_list[i][1])
                nexti = i + 1
        if nexti < len(sentence):
            yield pair(sentence[nexti:], pos_list[nexti][1])
