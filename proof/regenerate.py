"""A result's greedy answers drawn again from what produced them: the evaluation before training from the
committed model, the one after from that model with the family's final adapter merged in (proof/adapter.py).

Greedy decoding is a function of the weights and the prompt, so an answer that is not the model's (a completion
rewritten to the gold answer, then scored again: every other check agrees with it) is found here. Every task is
drawn again for the tiny model; a random sample of SAMPLE otherwise (`python -m proof verify --sample N`), not
chosen in advance, so that a forger cannot know which tasks go unchecked. The batch is drawn as the evaluation
drew it (the same sampler, the same engine); a completion that comes out otherwise is followed token by token
(follows()): it holds where each of its tokens is the model's best, or within engine.TIE_RELATIVE of the logit
scale of it (another device or batch shape rounds another way, and a near tie can go either way), with its
clipped and repetitive flags as the path gives them. Near ties in more than engine.MAX_TIED_SHARE of the drawn
rows are no rounding: they count as differences.
"""
from __future__ import annotations

import random

from proof import adapter, commit, files
from proof.records import Evaluation, FamilyResult
from shortlist import sources
from shortlist.errors import one_line
from shortlist.models import tiny

SAMPLE = 16  # tasks drawn again per evaluation where the model is not the tiny one


class Regenerator:
    """The committed model, loaded once for every family of a load when first needed."""

    def __init__(self, sample: int | None = None):
        self.sample, self._loaded = sample, {}  # sample: None, every task for tiny and SAMPLE else; 0: every task

    def base(self, name: str):
        if name not in self._loaded:
            from shortlist.generation import sampling
            self._loaded[name] = sampling.load(name)
        return self._loaded[name]

    def close(self) -> None:
        """The models dropped, and their GPU memory given back: the batch checks results before its jobs train."""
        if self._loaded:
            import gc

            import torch
            self._loaded.clear()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check(self, out, body: dict, result: FamilyResult) -> tuple[list[str], list[str]]:
        """(why the saved answers are not the model's, checks that could not run here), one line each."""
        trainee = commit.asked(body, result.family)  # asked and read as the family was screened and trained
        name = trainee.model
        try:
            loaded = self.base(name)
        except (OSError, ValueError, RuntimeError) as e:  # a model this machine cannot have: nothing is wrong
            return [], [f"answers drawn again: the committed model {name} cannot be loaded here ({one_line(e)})"]
        if commit.other_revision(body.get("model", {}).get("revision"), loaded.source.get("revision")):
            return [], [f"answers drawn again: the model here ({loaded.source.get('revision')}) is not the committed "
                        f"revision ({body.get('model', {}).get('revision')})"]
        n = result.after.n
        k = n if self.sample == 0 or (self.sample is None and name == tiny.NAME) else min(n, self.sample or SAMPLE)
        picked = sorted(random.SystemRandom().sample(range(n), k))
        tasks = sources.parse(result.family).tasks([result.after.seeds[i] for i in picked])
        trained = adapter.merged(loaded.model, files.adapter(out, result.slug))
        why = []
        for part, model in (("before", loaded.model), ("after", trained)):
            saved = getattr(result, part)
            fast = result.engine.get(part, {}).get("engine") != "generate"
            why += _differ(part, model, loaded, trainee, [t["question"] for t in tasks], saved, picked, fast)
        del trained
        return why, []


def _differ(part: str, model, loaded, trainee, questions: list[str], saved: Evaluation, picked: list[int],
            fast: bool) -> list[str]:
    """The drawn answers that are not the saved ones, as one line (or none)."""
    from shortlist.generation import engine, sampling
    sampler = sampling.Sampler(sampling.Loaded(model, loaded.tokenizer, loaded.source), trainee, 0, fast)
    drawn = sampler.sample(questions, k=1, greedy=True, trainee=trainee)
    prompts = sampling.prompt_ids(loaded.tokenizer, trainee, questions)
    wrong, tied = [], 0
    for j, i in enumerate(picked):
        want = (saved.completions[i], saved.clipped[i], saved.repetitive[i])
        if (drawn.texts[j][0], drawn.clipped[j][0], drawn.repetitive[j][0]) == want:
            continue
        path = follows(model, loaded.tokenizer, prompts[j], want[0], trainee.max_new_tokens, sampler.eos)
        if path is not None and sampling.degeneration(path, trainee.max_new_tokens, sampler.eos) == want[1:]:
            tied += 1
            continue
        wrong.append((i, (drawn.texts[j][0], drawn.clipped[j][0], drawn.repetitive[j][0])))
    if not wrong and tied <= engine.MAX_TIED_SHARE * len(picked):
        return []
    if not wrong:
        return [f"{part}: {tied} of {len(picked)} answers drawn again hold only through near ties"]
    i, got = wrong[0]
    source = "the committed model" if part == "before" else "the committed model and the family's adapter"
    first = f"saved {saved.completions[i][:60]!r}, drawn {got[0][:60]!r}" if got[0] != saved.completions[i] else \
        f"clipped/repetitive saved {saved.clipped[i]}/{saved.repetitive[i]}, drawn {got[1]}/{got[2]}"
    return [f"{part}: {len(wrong)} of {len(picked)} answers drawn again from {source} are not the saved ones "
            f"(first at task {i}: {first})"]


def follows(model, tokenizer, prompt: list[int], saved: str, max_new: int, eos: list[int]) -> list[int] | None:
    """The saved completion as a greedy path of the model from the prompt, each token its best or within
    engine.TIE_RELATIVE of the logit scale of it: the path's token ids, or None where no such path writes it."""
    import torch

    from shortlist.generation import engine
    path = []
    with torch.no_grad():
        for _ in range(max_new):  # the whole sequence each step, no cache: rare (a completion drawn otherwise), short
            logits = model(input_ids=torch.tensor([prompt + path], device=model.device)).logits[0, -1].float()
            margin = engine.TIE_RELATIVE * logits.abs().max()
            near = [int(t) for t in torch.argsort(logits, descending=True)[:engine.TIE_TOP]
                    if logits[t] >= logits.max() - margin]
            step = next((t for t in near if _along(tokenizer, path, t, saved, eos)), None)
            if step is None:
                return None
            path.append(step)
            if step in eos:
                return path
    return path if tokenizer.decode(path, skip_special_tokens=True) == saved else None


def _along(tokenizer, path: list[int], token: int, saved: str, eos: list[int]) -> bool:
    """Whether one more token keeps the path on the saved text (an end only where the text is complete)."""
    if token in eos:
        return tokenizer.decode(path, skip_special_tokens=True) == saved
    return saved.startswith(tokenizer.decode(path + [token], skip_special_tokens=True).rstrip("\ufffd"))
