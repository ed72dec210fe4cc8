"""The trainee: which model, how it is asked, how it samples, and the thresholds of Shortlist's rule.

Everything that decides what "the model can do" is one frozen record, a Trainee, so the
screening that predicts and the GRPO run that tests the prediction read the same values, and
predictions.json records every one of them once. Named profiles live in PROFILES; a user adds
their own without editing the package: a JSON file (`--trainee my.json`), a profile with
overrides (`--trainee "qwen3(max_new_tokens=256)"`), or register() from Python.

How it asks for an answer (system_prompt) and reads one (extraction, extraction.py) is either set,
for every source alike, or left to each family's source (SOURCE, None: the default profile's), which
then asks and reads its families its own way (its SYSTEM_PROMPT and EXTRACTION). for_source() is the
one place that resolves them; screening, the audit, training and evaluation all ask through it, and
each screen records the values its family was asked and read with.

Sampling is GRPO's: TRL computes the policy's log-probabilities as softmax(logits / temperature)
with no truncation, so only top_k, top_p and min_p switched off sample exactly from the policy
the loss differentiates (Qwen3's own generation_config, top_k=20 and top_p=0.95, would make every
sample slightly off-policy). Greedy decoding is only for evaluation.

Shortlist's rule reads five thresholds, fields of the record here (pass_min, pass_max, grpo_signal_min,
ceiling_min), so that predictions.json records them with the rest; the rule itself, its
verdicts and why each threshold sits where it does are rule.py's.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

from shortlist import extraction as extraction_
from shortlist import rule, spec
from shortlist.errors import OneLine, one_line

RETIRED = {"guess_min": "design v1's floor: a policy at 0.2 of the tasks was a guess even below the model's own pass@1"}
SOURCE = None  # a system_prompt or extraction left to the source: each source's own convention (for_source())


class TraineeError(OneLine, ValueError):
    """A trainee that cannot be used; the message is one line."""


# --- the record -----------------------------------------------------------------------------------
# Bounds on what a trainee may say, each refused in one line when it is made (Trainee._check):
NAME_MAX = 255  # characters in a profile name (a file name's limit: a .json trainee's name is its file's)
PATH_MAX = 4096  # characters in a model name or folder (Linux's longest path)
# characters in a system prompt: at ~4 a token, 8k tokens, a quarter of Qwen3-0.6B's 32k context, sent with
# every completion (a 10 MB prompt was accepted and tokenized 32 times a step)
SYSTEM_PROMPT_MAX = 32_768
# GRPO's temperature: at 0.01 a group's samples are the greedy one to float precision (no spread, no
# signal), and TRL's loss divides the logits by it (gradients x 100); at 10 the samples are noise
TEMPERATURE = (0.01, 10.0)
# nucleus sampling's floor: a nucleus of less than 0.1% of the probability is the top token alone on any
# distribution a model gives, so a group is the greedy answer 8 times (no signal); 5e-324 was accepted
TOP_P_MIN = 1e-3
TOP_K_MAX = 1 << 20  # beyond any vocabulary (Qwen3's: 151,936 tokens): a larger top_k is off, i.e. 0
REPETITION_PENALTY = (0.1, 10.0)  # a repeated token's logit scaled by at most 10x either way


@dataclass(frozen=True)
class Trainee:
    profile: str  # the profile it was built from
    model: str  # a hub name, a local folder, or "tiny" (built offline)
    system_prompt: str | None  # "" sends no system message; None (SOURCE): each source's own
    enable_thinking: bool  # passed to the chat template (Qwen3's thinking would spend the budget)
    extraction: str | None  # an extraction's name (extraction.py), or regex:<pattern>; None (SOURCE): the source's
    # sampling, exactly as TRL's GRPOTrainer is configured with them
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 switches top-k off, as TRL's default does
    min_p: float | None = None
    repetition_penalty: float = 1.0
    max_new_tokens: int = 128  # the seed's; a GRPO step is ~95% generation
    group: int = 8  # completions per prompt: GRPO's num_generations, and the k of screening's pass@k
    # Shortlist's rule (rule.py): its thresholds
    pass_min: float = rule.THRESHOLDS["pass_min"]
    pass_max: float = rule.THRESHOLDS["pass_max"]
    grpo_signal_min: float = rule.THRESHOLDS["grpo_signal_min"]
    ceiling_min: float = rule.THRESHOLDS["ceiling_min"]

    def __post_init__(self):
        for f in fields(self):  # 1 means 1.0 where a float is due (JSON, YAML and papermill write ints)
            value = getattr(self, f.name)
            if "float" in str(f.type) and type(value) is int:
                object.__setattr__(self, f.name, float(value))
        self._check()
        try:
            if self.extraction is not None:
                extraction_.extractor(self.extraction)
        except extraction_.ExtractionError as e:
            raise TraineeError(str(e)) from None

    def _check(self) -> None:
        def bad(name, why):
            value = repr(getattr(self, name))
            value = value if len(value) <= 80 else value[:77] + "..."  # a 10 MB prompt is not echoed whole
            raise TraineeError(f"trainee {self.profile[:80]!r}: {name}={value}: {why}")
        for f in fields(self):
            value, kind = getattr(self, f.name), str(f.type)
            base = kind.replace(" | None", "")
            ok = (value is None and base != kind) or (
                isinstance(value, str) if base == "str" else
                isinstance(value, bool) if base == "bool" else
                isinstance(value, int) and not isinstance(value, bool) if base == "int" else
                isinstance(value, float))
            if not ok:
                bad(f.name, f"must be {kind}")
            if isinstance(value, float) and not math.isfinite(value):
                bad(f.name, "must be finite")
        if not self.profile or not self.model:
            bad("model" if self.profile else "profile", "must not be empty")
        for name, most in (("profile", NAME_MAX), ("model", PATH_MAX), ("system_prompt", SYSTEM_PROMPT_MAX)):
            if len(getattr(self, name) or "") > most:
                bad(name, f"{len(getattr(self, name)):,} characters, more than {most:,}")
        if any(c in self.model for c in "\0\n"):
            bad("model", "a model name or folder holds no NUL or newline")
        if not TEMPERATURE[0] <= self.temperature <= TEMPERATURE[1]:
            bad("temperature", f"must lie in [{TEMPERATURE[0]}, {TEMPERATURE[1]}]: below, a group's samples are all "
                               f"the greedy one (no signal); above, noise")
        if not TOP_P_MIN <= self.top_p <= 1:
            bad("top_p", f"must lie in [{TOP_P_MIN:g}, 1]: below, the nucleus is the top token alone (no signal)")
        if not 0 <= self.top_k <= TOP_K_MAX:
            bad("top_k", f"must be 0 (off) or up to {TOP_K_MAX:,}, more than any vocabulary")
        if self.min_p is not None and not 0 <= self.min_p < 1:
            bad("min_p", "must lie in [0, 1) or be None")
        if not REPETITION_PENALTY[0] <= self.repetition_penalty <= REPETITION_PENALTY[1]:
            bad("repetition_penalty", f"must lie in [{REPETITION_PENALTY[0]}, {REPETITION_PENALTY[1]}] (1.0: off)")
        if not 1 <= self.max_new_tokens <= 32768:
            bad("max_new_tokens", "must lie in 1..32768")
        if not 2 <= self.group <= 256:
            bad("group", "must lie in 2..256 (GRPO compares completions within a group)")
        if refused := rule.refusal(self):
            bad(*refused)

    # how it is asked, and how its answer is read
    def for_source(self, source: str) -> "Trainee":
        """This trainee as it asks and reads the families of a source (a registered name): what it leaves to
        the source (SOURCE) becomes that source's convention (extraction.convention()); what it sets stays."""
        if self.system_prompt is not None and self.extraction is not None:
            return self
        try:
            prompt, extraction = extraction_.convention(source)
        except extraction_.ExtractionError as e:
            raise TraineeError(str(e)) from None
        return dataclasses.replace(self, system_prompt=prompt if self.system_prompt is None else self.system_prompt,
                                   extraction=extraction if self.extraction is None else self.extraction)

    def _resolved(self, name: str) -> None:
        if getattr(self, name) is None:
            raise TraineeError(f"trainee {self.profile!r} leaves its {name} to the source: "
                               f"ask and read through trainee.for_source(family.source)")

    def messages(self, question: str) -> list[dict]:
        self._resolved("system_prompt")
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [{"role": "user", "content": question}]

    def clean(self, text: str) -> str | None:
        """The answer in a completion (thinking removed), or None when it holds none: it scores 0."""
        self._resolved("extraction")
        return extraction_.clean(self.extraction, text)

    def written(self, answer: str) -> str:
        """An answer written the way this trainee is asked to write one (extraction.written())."""
        self._resolved("extraction")
        return extraction_.written(self.extraction, answer)

    def sampling(self) -> dict:
        """The fields GRPOConfig and GenerationConfig take under the same names."""
        return {k: getattr(self, k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")}

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> "Trainee":
        record = {k: v for k, v in record.items() if k not in RETIRED}  # an older record's, read and ignored
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(record) - known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            raise TraineeError(f"trainee has no field {unknown[0]!r}" + (f"; did you mean {close[0]}?" if close else ""))
        missing = sorted(f.name for f in fields(cls) if f.default is dataclasses.MISSING and f.name not in record)
        if missing:
            raise TraineeError(f"trainee is missing {', '.join(missing)}")
        return cls(**record)

    def replace(self, **changes) -> "Trainee":
        return Trainee.from_dict(self.as_dict() | changes)


# --- profiles -------------------------------------------------------------------------------------
PROFILES: dict[str, Trainee] = {}


def register(trainee: Trainee) -> Trainee:
    """Make a profile resolvable by its name (an identifier, so `name(field=value)` can spell it)."""
    if not trainee.profile.isidentifier():
        raise TraineeError(f"profile name {trainee.profile!r}: use letters, digits and _ only")
    PROFILES[trainee.profile] = trainee
    return trainee


# The default: asked and read as each source asks for answers (its own convention, extraction.py; Reasoning
# Gym's "direct" system prompt and answer tags, which the source says why it chose).
QWEN3 = register(Trainee(profile="qwen3", model="Qwen/Qwen3-0.6B", system_prompt=SOURCE, enable_thinking=False,
                         extraction=SOURCE))

# SmolLM2-135M-Instruct almost never writes <answer> tags (sampled pass@1 0.005 on easy products
# with them), and rarely an "Answer:" line when asked (0.02); it writes "The answer is 12." So it is
# asked for a final answer line and read by its last number, which it does follow (pass@1 0.17-0.32
# on easy numeric families; protocol-notes). The prompt below was measured on the GPU machine
# against the alternatives: see SMOLLM2_MEASURED.
SMOLLM2 = register(Trainee(
    profile="smollm2", model="HuggingFaceTB/SmolLM2-135M-Instruct",
    system_prompt="Give the final answer on the last line as 'Answer: <answer>'.",
    enable_thinking=False, extraction="last_number"))
SMOLLM2_MEASURED = (  # bench/smollm2_profile.py on the H200, 2026-12-01: bench/results/smollm2_profile.h200.txt
    "six prompt x extraction candidates, 24 tasks x 8 samples on three easy families and 200 greedy easy "
    "products each: this prompt with the last number scored sampled pass@1 0.30 / 0.16 / 0.27 and greedy "
    "0.720; the longer 'Solve the problem. End your reply with ...' 0.17 / 0.12 / 0.26 and 0.640; no system "
    "prompt 0.660; reasoning-gym's direct prompt 0.620 with the last number and 0.000 with <answer> tags; "
    "reading the 'Answer:' line itself 0.000 (the model rarely writes it)")


TRAINEE_FILE_MAX = 1 << 20  # bytes in a trainee file: a system prompt at its limit and room to spare
EXTENDS_MAX = 16  # trainee files in one chain of "extends"


def resolve(trainee: "str | Trainee | dict") -> Trainee:
    """A Trainee from a profile name, `name(field=value, ...)`, a JSON file, or a record.

    A JSON file holds Trainee fields; with "extends": "<profile>" (a profile name, spec or another
    file, a relative one read beside it) it overrides that one, otherwise it names every field a
    profile has no default for. A file that extends itself, directly or through others, is refused
    in one line, and so is one over TRAINEE_FILE_MAX bytes or not a regular file (a FIFO blocks)."""
    return _resolve(trainee, ())


def _resolve(trainee: "str | Trainee | dict", chain: tuple) -> Trainee:
    if isinstance(trainee, Trainee):
        return trainee
    if isinstance(trainee, dict):
        return Trainee.from_dict(trainee)
    text = str(trainee).strip()
    if text.endswith(".json") or _is_file(text):
        return _from_file(Path(text), chain)
    try:
        name, overrides = spec.parse_call(text, "trainee")
    except spec.SpecError as e:
        raise TraineeError(str(e)) from None
    if name not in PROFILES:
        close = difflib.get_close_matches(name, list(PROFILES), n=2, cutoff=0.5)
        raise TraineeError(f"unknown trainee {name!r}; " + (f"did you mean {', '.join(close)}?" if close else
                                                           f"profiles: {', '.join(PROFILES)}, or a .json file"))
    return PROFILES[name].replace(**overrides) if overrides else PROFILES[name]


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for a path, or holding NUL: a spec, not a file
        return False


def _from_file(path: Path, chain: tuple = ()) -> Trainee:
    real = path.resolve()
    if real in chain:
        raise TraineeError(f"trainee file {path} extends itself: {' -> '.join(p.name for p in (*chain, real))}")
    if len(chain) >= EXTENDS_MAX:
        raise TraineeError(f"trainee file {path}: more than {EXTENDS_MAX} files extend one another")
    if not path.exists():
        raise TraineeError(f"trainee file {path} does not exist")
    if not path.is_file():  # a FIFO or a device would block or never end
        raise TraineeError(f"trainee file {path} is not a regular file")
    try:
        with open(path, "rb") as f:
            data = f.read(TRAINEE_FILE_MAX + 1)
    except OSError as e:
        raise TraineeError(f"trainee file {path}: {one_line(e)}") from None
    if len(data) > TRAINEE_FILE_MAX:
        raise TraineeError(f"trainee file {path}: more than {TRAINEE_FILE_MAX:,} bytes")
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise TraineeError(f"trainee file {path}: {one_line(e)}") from None
    if not isinstance(record, dict):
        raise TraineeError(f"trainee file {path}: must hold a JSON object of trainee fields")
    base = record.pop("extends", None)
    if base is not None:
        if not isinstance(base, str):
            raise TraineeError(f"trainee file {path}: extends={base!r}: give a profile name or a .json file")
        beside = path.parent / base  # a file named by a relative path is read beside the file that names it
        base = str(beside) if base.strip().endswith(".json") and not Path(base).is_absolute() and beside.is_file() \
            else base
        return _resolve(base, (*chain, real)).replace(**{"profile": path.stem} | record)
    return Trainee.from_dict({"profile": path.stem} | record)
