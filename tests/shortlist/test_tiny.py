from pathlib import Path

from shortlist.models import tiny
from shortlist import trainee

ASKED = trainee.QWEN3.for_source("reasoning_gym")  # the default trainee, as it asks Reasoning Gym's families


def test_builds_once_into_its_cache(tiny_model):
    path = tiny.ensure()
    assert path == tiny.path() and tiny_model.source["path"] == str(path)
    assert tiny_model.source["revision"] == tiny.fingerprint(path)
    assert sum(f.stat().st_size for f in Path(path).iterdir()) < 2_000_000  # a few hundred KB of weights


def test_is_qwen3_shaped_and_small(tiny_model):
    model = tiny_model.model
    assert model.config.model_type == "qwen3"
    assert sum(p.numel() for p in model.parameters()) < 300_000


def test_chat_template_honours_enable_thinking(tiny_model):
    tok = tiny_model.tokenizer
    off = tok.apply_chat_template(ASKED.messages("q"), add_generation_prompt=True, tokenize=False,
                                  enable_thinking=False)
    on = tok.apply_chat_template(ASKED.messages("q"), add_generation_prompt=True, tokenize=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and on.endswith("<|im_start|>assistant\n")


def test_tokenizer_round_trips_text(tiny_model):
    tok = tiny_model.tokenizer
    text = "State the final answer: 12 + 7 = <answer>19</answer> ünïcödé ∧∨¬"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_ships_qwen3s_generation_config_for_sampling_to_override(tiny_model):
    g = tiny_model.model.generation_config
    assert (g.top_k, g.top_p, g.temperature) == (20, 0.95, 0.6)


BUILD_ONCE = """
import sys, time
from pathlib import Path
from shortlist.models import tiny
def build(folder):  # a stand-in for the ~30 s build: it records itself and takes a while
    with open(sys.argv[1], "a") as f:
        f.write("built\\n")
    time.sleep(1.0)
    (Path(folder) / "model.safetensors").write_bytes(b"x")
tiny.build = build
print(tiny.ensure())
"""


def test_processes_starting_together_on_a_cold_cache_build_it_once(tmp_path):
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "SHORTLIST_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    log = tmp_path / "builds"
    processes = [subprocess.Popen([sys.executable, "-c", BUILD_ONCE, str(log)], env=env, stdout=subprocess.PIPE,
                                  text=True) for _ in range(3)]
    folders = {p.communicate(timeout=120)[0].strip() for p in processes}
    assert log.read_text().splitlines() == ["built"]
    assert folders == {str(tmp_path / "cache" / tiny.path().name)}


BUILD_SLOWLY = """
import sys, time
from shortlist.models import tiny
def build(folder):  # a build that holds the lock until the test is done with it
    print("building", flush=True)
    time.sleep(600)
tiny.build = build
tiny.ensure()
"""


def test_a_screen_waiting_on_another_processs_build_says_so_once_with_its_pid_and_ctrl_c_is_one_line(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "SHORTLIST_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    builder = subprocess.Popen([sys.executable, "-c", BUILD_SLOWLY], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert builder.stdout.readline().strip() == "building"
        # as a terminal starts it: Ctrl-C not ignored. A child inherits an ignored SIGINT, and then Python installs no
        # KeyboardInterrupt at all: in one CI run (second build) this screen ignored the Ctrl-C, waited out the
        # builder's 600 s and built the model itself, so its pytest worker had SIGINT ignored at that moment
        screen = subprocess.Popen([sys.executable, "-m", "shortlist", "screen", "--model", "tiny", "--families",
                                   "chain_sum", "--tasks", "1"], env=env, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        first = screen.stderr.readline()
        assert first.startswith(f"waiting for process {builder.pid}, which is building {tiny.path().name} in ")
        screen.send_signal(signal.SIGINT)  # Ctrl-C
        rest = screen.stderr.read()
        assert screen.wait(timeout=60) == 130, rest
        lines = rest.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: stopped while waiting for process {builder.pid}")
        assert "that build goes on; run the same command again" in lines[0]
    finally:
        builder.kill()
        builder.wait()


def test_the_build_says_what_it_does_at_least_every_heartbeat(tiny_model, monkeypatch, capsys):
    """A person waits on the build (minutes on a busy machine): its training says where it is at least every
    HEARTBEAT_S seconds (here 0: every step), on stderr."""
    import copy
    from shortlist.sources import parse
    model, tok = copy.deepcopy(tiny_model.model), tiny_model.tokenizer
    taught = [t | {"family": "chain_sum"} for t in parse("chain_sum(max_terms=2, max_digits=1)").tasks(range(2))]
    monkeypatch.setattr(tiny, "HEARTBEAT_S", 0)
    tiny._teach(model, tok, taught, [f"<answer>{t['answer']}</answer>" for t in taught], steps=3, batch=2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"building the tiny model: training step {i} of 3" for i in range(3)]


def test_the_build_is_the_same_model_whatever_the_thread_count(tmp_path):
    # a Ray worker runs with OMP_NUM_THREADS=1 (the suite's xdist workers too), a driver with every core: both
    # must build the weights the run committed (before BUILD_THREADS, 1 thread built another model than 2)
    import os
    import subprocess
    import sys
    code = "from shortlist.models import tiny; print(tiny.fingerprint(tiny.ensure()))"
    built = {}
    for threads in ("1", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, SHORTLIST_CACHE=str(tmp_path / threads))
        env.pop("SHORTLIST_TINY_SEED", None)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        built[threads] = done.stdout.strip()
    assert built["1"] == built["3"]
