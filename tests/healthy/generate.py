"""Write the healthy multi-rank training logs of this folder (seeded, so the output is stable).

Run ``python tests/healthy/generate.py`` after changing it and commit its output with it; tests
read the committed files and never regenerate them. Each log imitates one framework's real
output: launcher banners, rank prefixes, NCCL INFO chatter, tqdm bars refreshed with carriage
returns, routine warnings, and the look-alike lines a healthy run prints (``nan_count=0``,
``0 errors``, ``error_if_nonfinite=False``, advice that mentions running out of memory).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent

ESC = "\x1b"
BOLD, DIM, RESET = f"{ESC}[1m", f"{ESC}[2m", f"{ESC}[0m"
BLUE, YELLOW, MAGENTA, GREEN = f"{ESC}[34m", f"{ESC}[33m", f"{ESC}[35m", f"{ESC}[32m"
BAR_CHARS = " ▏▎▍▌▋▊▉█"


class Log:
    """Lines stamped with a time in seconds; rendered in time order, like interleaved ranks."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.events: list[tuple[float, int, str]] = []

    def add(self, t: float, line: str) -> None:
        self.events.append((t, len(self.events), line))

    def extend(self, t: float, lines: Iterable[str], step: float = 0.0) -> float:
        for line in lines:
            self.add(t, line)
            t += step
        return t

    def when(self, t: float) -> datetime:
        return self.start + timedelta(seconds=t)

    def render(self) -> str:
        return "".join(line + "\n" for _, _, line in sorted(self.events))


# ---------------------------------------------------------------- time formats


def py_time(d: datetime) -> str:
    """Python logging's asctime: 2024-05-14 10:02:11,345."""
    return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"


def glog_head(level: str, d: datetime, tid: int, where: str) -> str:
    """A glog head as c10d prints it: I0514 10:02:11.345678 140031 file.cpp:123]."""
    return f"{level}{d.strftime('%m%d %H:%M:%S')}.{d.microsecond:06d} {tid} {where}]"


def c10d_head(level: str, d: datetime, where: str) -> str:
    """The head of torch 2.4+ C++ warnings: [W514 10:02:11.345678901 socket.cpp:697]."""
    return f"[{level}{d.month}{d.strftime('%d %H:%M:%S')}.{d.microsecond:06d}{d.microsecond % 997:03d} {where}]"


def clock(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm_bar(desc: str, n: int, total: int, elapsed: float, postfix: str = "", unit: str = "it") -> str:
    """One tqdm refresh, as tqdm formats it for a file (width-10 bar)."""
    frac = n / total
    cells = frac * 10
    full = int(cells)
    bar = "█" * full
    if full < 10:
        bar += BAR_CHARS[int((cells - full) * 8)] + " " * (9 - full)
    if n == 0 or elapsed <= 0:
        tail = f"[00:00<?, ?{unit}/s{postfix}]"
    else:
        rate = n / elapsed
        left = (total - n) / rate
        speed = f"{rate:5.2f}{unit}/s" if rate >= 1 else f"{1 / rate:5.2f}s/{unit}"
        tail = f"[{clock(elapsed)}<{clock(left)}, {speed}{postfix}]"
    head = f"{desc}: " if desc else ""
    return f"{head}{int(frac * 100):3d}%|{bar}| {n}/{total} {tail}"


def tqdm_line(desc: str, points: list[int], total: int, per_item: float, postfix: Callable[[int], str] | None = None) -> str:
    """Several refreshes of one bar joined by carriage returns, as a redirected tqdm writes them."""
    parts = [tqdm_bar(desc, n, total, n * per_item, postfix(n) if postfix else "") for n in points]
    return "\r" + "\r".join(parts)


# ---------------------------------------------------------------- shared chatter


def omp_banner() -> list[str]:
    return [
        "*****************************************",
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
        "your system being overloaded, please further tune the variable for optimal performance in "
        "your application as needed. ",
        "*****************************************",
    ]


def nccl_init(
    rng: random.Random, host: str, node: int, pid: int, local: int, rank: int, nranks: int, nnodes: int
) -> list[str]:
    """What NCCL_DEBUG=INFO prints while one rank builds its communicator."""
    tid = pid + rng.randint(40, 400)
    head = f"{host}:{pid}:{pid} [{local}] NCCL INFO"
    thead = f"{host}:{pid}:{tid} [{local}] NCCL INFO"
    comm = f"0x{rng.getrandbits(44):x}"
    bus = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"][local % 8]
    local_ranks = nranks // nnodes
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    lines = []
    if rank == 0:
        lines.append(f"{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.20.5+cuda12.4")
    lines += [
        f"{head} cudaDriverVersion 12040",
        f"{head} Bootstrap : Using eth0:10.42.{node}.{11 + node}<0>",
        f"{head} NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation",
        f"{thead} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [2]mlx5_4:1/IB [3]mlx5_5:1/IB ; OOB eth0:10.42.{node}.{11 + node}<0>",
        f"{thead} Using non-device net plugin version 0",
        f"{thead} Using network IB",
        f"{thead} comm {comm} rank {rank} nranks {nranks} cudaDev {local} nvmlDev {local} busId {bus} commId 0x5c1f0e7a9d23b4c6 - Init START",
        f"{thead} Setting affinity for GPU {local} to ffff,ffffffff,00000000,0000ffff,ffffffff",
        f"{thead} comm {comm} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks {local_ranks} localRank {local} MNNVL 0",
        f"{thead} Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {nxt}/-1/-1->{rank}->{prv} [2] {nxt}/-1/-1->{rank}->{prv} [3] {nxt}/-1/-1->{rank}->{prv}",
        f"{thead} P2P Chunksize set to 131072",
    ]
    if rank == 0:
        ring = " ".join(f"{r:3d}" for r in range(min(nranks, 16)))
        lines += [f"{thead} Channel {c:02d}/32 :  {ring}" for c in range(4)]
    for c in range(4):
        via = "P2P/IPC/read" if local + 1 < local_ranks else "NET/IB/0/GDRDMA"
        lines.append(f"{thead} Channel {c:02d}/0 : {rank}[{local}] -> {nxt}[{(local + 1) % local_ranks}] via {via}")
    lines += [
        f"{thead} Connected all rings",
        f"{thead} Connected all trees",
        f"{thead} threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
        f"{thead} 32 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        f"{thead} TUNER/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-tuner.so",
        f"{thead} TUNER/Plugin: Using internal tuner plugin.",
        f"{thead} ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {local} nvmlDev {local} busId {bus} commId 0x5c1f0e7a9d23b4c6 - Init COMPLETE",
    ]
    return lines


def nccl_destroy(host: str, pid: int, local: int, rank: int, nranks: int) -> str:
    return f"{host}:{pid}:{pid + 7} [{local}] NCCL INFO comm 0x7f3a{rank:04x}c0 rank {rank} nranks {nranks} cudaDev {local} busId 18000 - Destroy COMPLETE"


def ipv6_warning(d: datetime, host: str, port: int) -> str:
    return (
        f"{c10d_head('W', d, 'socket.cpp:697')} [c10d] The client socket cannot be initialized to "
        f"connect to [{host}]:{port} (errno: 97 - Address family not supported by protocol)."
    )


TOKENIZERS_FORK = [
    "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. Disabling parallelism to avoid deadlocks...",
    "To disable this warning, you can either:",
    "\t- Avoid using `tokenizers` before the fork if possible",
    "\t- Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)",
]

REENTRANT = [
    "{site}/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
    "  warnings.warn(",
]

HUB_RETRY = (
    "WARNING:urllib3.connectionpool:Retrying (Retry(total=4, connect=None, read=None, redirect=None, "
    "status=None)) after connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', "
    "port=443): Read timed out. (read timeout=10)\")': /api/datasets/tatsu-lab/alpaca/revision/main"
)

HUB_RESET = (
    "WARNING:urllib3.connectionpool:Retrying (Retry(total=3, connect=None, read=None, redirect=None, "
    "status=None)) after connection broken by 'ProtocolError('Connection aborted.', "
    "ConnectionResetError(104, 'Connection reset by peer'))': /api/datasets/tatsu-lab/alpaca/paths-info/main"
)

SITE = "/opt/conda/lib/python3.10/site-packages"


# ---------------------------------------------------------------- HF Trainer under torchrun --tee 3


def hf_trainer(rng: random.Random) -> str:
    """An 8-GPU HF Trainer fine-tune launched by torchrun --tee 3 (every line tagged [defaultN]:)."""
    log = Log(datetime(2024, 5, 14, 9, 12, 3, 117000, tzinfo=UTC))
    host, nranks, pids = "gpu-a100-07", 8, [48211 + i for i in range(8)]
    t = 0.0
    log.add(t, "+ torchrun --nproc_per_node=8 --tee 3 train.py --model_name_or_path meta-llama/Llama-2-7b-hf --data_path alpaca_data.json --bf16 True --output_dir out/llama2-7b-alpaca --num_train_epochs 3 --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --logging_steps 1 --save_steps 400 --gradient_checkpointing True")
    log.add(t + 0.4, f"{SITE}/torch/distributed/run.py:779: UserWarning: ")
    log.extend(t + 0.4, omp_banner())

    def say(rank: int, when: float, text: str) -> None:
        log.add(when, f"[default{rank}]:{text}")

    for r in range(nranks):
        when = 4.0 + r * 0.011
        say(r, when, f"{SITE}/transformers/utils/generic.py:441: FutureWarning: `torch.utils._pytree._register_pytree_node` is deprecated. Please use `torch.utils._pytree.register_pytree_node` instead.")
        say(r, when + 1e-4, "  _torch_pytree._register_pytree_node(")
    t = 6.0
    for r in range(nranks):
        when = t + r * 0.013 + rng.random() * 0.05
        say(r, when, f"05/14/2024 09:12:{9 + r // 4:02d} - WARNING - __main__ - Process rank: {r}, device: cuda:{r}, n_gpu: 1, distributed training: True, 16-bits training: False")
    args = [
        "_n_gpu=1,", "accelerator_config={'split_batches': False, 'dispatch_batches': None, 'even_batches': True, 'use_seedable_sampler': True},",
        "adafactor=False,", "adam_beta1=0.9,", "adam_beta2=0.999,", "adam_epsilon=1e-08,", "auto_find_batch_size=False,",
        "bf16=True,", "bf16_full_eval=False,", "data_seed=None,", "dataloader_drop_last=False,", "dataloader_num_workers=4,",
        "dataloader_persistent_workers=False,", "dataloader_pin_memory=True,", "ddp_backend=None,", "ddp_bucket_cap_mb=None,",
        "ddp_find_unused_parameters=None,", "ddp_timeout=1800,", "debug=[],", "deepspeed=None,", "disable_tqdm=False,",
        "do_eval=True,", "do_predict=False,", "do_train=True,", "eval_accumulation_steps=None,", "eval_delay=0,",
        "eval_steps=200,", "evaluation_strategy=steps,", "fp16=False,", "fp16_full_eval=False,", "fsdp=[],",
        "fsdp_config={'min_num_params': 0, 'xla': False, 'xla_fsdp_v2': False, 'xla_fsdp_grad_ckpt': False},",
        "gradient_accumulation_steps=4,", "gradient_checkpointing=True,", "gradient_checkpointing_kwargs=None,",
        "greater_is_better=None,", "half_precision_backend=auto,", "hub_strategy=every_save,", "ignore_data_skip=False,",
        "include_num_input_tokens_seen=False,", "learning_rate=2e-05,", "length_column_name=length,",
        "load_best_model_at_end=False,", "local_rank=0,", "log_level=passive,", "log_level_replica=warning,",
        "logging_dir=out/llama2-7b-alpaca/runs/May14_09-12-08_gpu-a100-07,", "logging_first_step=False,",
        "logging_nan_inf_filter=True,", "logging_steps=1,", "logging_strategy=steps,", "lr_scheduler_type=cosine,",
        "max_grad_norm=1.0,", "max_steps=-1,", "metric_for_best_model=None,", "num_train_epochs=3.0,",
        "optim=adamw_torch,", "output_dir=out/llama2-7b-alpaca,", "overwrite_output_dir=False,",
        "per_device_eval_batch_size=8,", "per_device_train_batch_size=4,", "prediction_loss_only=False,",
        "remove_unused_columns=False,", "report_to=['wandb'],", "save_on_each_node=False,", "save_safetensors=True,",
        "save_steps=400,", "save_strategy=steps,", "save_total_limit=3,", "seed=42,", "skip_memory_metrics=True,",
        "tf32=True,", "torch_compile=False,", "warmup_ratio=0.03,", "warmup_steps=0,", "weight_decay=0.0,",
    ]
    t = 7.2
    say(0, t, "05/14/2024 09:12:10 - INFO - __main__ - Training/evaluation parameters TrainingArguments(")
    for i, a in enumerate(args):
        say(0, t + 0.0001 * i, a)
    say(0, t + 0.01, ")")
    t = 8.0
    say(0, t, HUB_RETRY)
    say(0, t + 1.1, HUB_RESET)
    say(0, t + 2.1, f"[INFO|configuration_utils.py:726] {py_time(log.when(t + 2.1))} >> loading configuration file config.json from cache at /data/hf/hub/models--meta-llama--Llama-2-7b-hf/snapshots/01c7f73d771dfac7d292323805ebc428287df4f9/config.json")
    say(0, t + 2.2, f"[INFO|configuration_utils.py:789] {py_time(log.when(t + 2.2))} >> Model config LlamaConfig {{")
    cfg = ['"_name_or_path": "meta-llama/Llama-2-7b-hf",', '"architectures": [', '"LlamaForCausalLM"', "],",
           '"attention_bias": false,', '"attention_dropout": 0.0,', '"bos_token_id": 1,', '"eos_token_id": 2,',
           '"hidden_act": "silu",', '"hidden_size": 4096,', '"initializer_range": 0.02,', '"intermediate_size": 11008,',
           '"max_position_embeddings": 4096,', '"model_type": "llama",', '"num_attention_heads": 32,',
           '"num_hidden_layers": 32,', '"num_key_value_heads": 32,', '"pretraining_tp": 1,', '"rms_norm_eps": 1e-05,',
           '"rope_scaling": null,', '"rope_theta": 10000.0,', '"tie_word_embeddings": false,', '"torch_dtype": "float16",',
           '"transformers_version": "4.40.2",', '"use_cache": true,', '"vocab_size": 32000']
    for i, c in enumerate(cfg):
        say(0, t + 2.2 + 0.0001 * i, "  " + c)
    say(0, t + 2.21, "}")
    say(0, t + 2.21, "")
    t = 11.0
    for r in range(nranks):
        pts = [0, 1, 2]
        say(r, t + r * 0.2, tqdm_line("Loading checkpoint shards", pts, 2, 3.6 + r * 0.05))
    t = 19.0
    say(0, t, f"[INFO|modeling_utils.py:4170] {py_time(log.when(t))} >> All model checkpoint weights were used when initializing LlamaForCausalLM.")
    say(0, t + 0.1, f"[INFO|modeling_utils.py:4178] {py_time(log.when(t + 0.1))} >> All the weights of LlamaForCausalLM were initialized from the model checkpoint at meta-llama/Llama-2-7b-hf.")
    say(0, t + 0.3, "WARNING:root:Loading data...")
    say(0, t + 0.9, "WARNING:root:Formatting inputs...")
    say(0, t + 1.2, "WARNING:root:Tokenizing inputs... This may take some time...")
    say(0, t + 1.3, "Data validation finished: 86320 records, 0 errors, 0 duplicates dropped.")
    t = 40.0
    for r in range(nranks):
        for j, line in enumerate(nccl_init(rng, host, 0, pids[r], r, r, nranks, 1)):
            say(r, t + r * 0.003 + j * 0.0007, line)
    t = 43.0
    say(0, t, f"{BLUE}{BOLD}wandb{RESET}: Currently logged in as: {YELLOW}ml-team{RESET}. Use {BOLD}`wandb login --relogin`{RESET} to force relogin")
    say(0, t + 1.2, f"{BLUE}{BOLD}wandb{RESET}: Tracking run with wandb version 0.16.6")
    say(0, t + 1.2, f"{BLUE}{BOLD}wandb{RESET}: Run data is saved locally in {BOLD}/workspace/wandb/run-20240514_091246-3kq0z8vd{RESET}")
    say(0, t + 1.3, f"{BLUE}{BOLD}wandb{RESET}: Syncing run {YELLOW}llama2-7b-alpaca{RESET}")
    say(0, t + 1.3, f"{BLUE}{BOLD}wandb{RESET}: ⭐️ View project at https://wandb.ai/ml-team/alpaca")
    total, accum = 2023, 4
    t = 46.0
    say(0, t, f"[INFO|trainer.py:2048] {py_time(log.when(t))} >> ***** Running training *****")
    for i, s in enumerate([
        "  Num examples = 86,320", "  Num Epochs = 3", "  Instantaneous batch size per device = 4",
        "  Total train batch size (w. parallel, distributed & accumulation) = 128",
        f"  Gradient Accumulation steps = {accum}", f"  Total optimization steps = {total:,}",
        "  Number of trainable parameters = 6,738,415,616",
    ]):
        say(0, t + 0.0001 * (i + 1), f"[INFO|trainer.py:{2049 + i}] {py_time(log.when(t))} >> {s}")
    say(0, t + 0.2, f"\r  0%|          | 0/{total} [00:00<?, ?it/s]")
    for r in range(nranks):
        when = t + 3 + r * 0.05
        say(r, when, REENTRANT[0].format(site=SITE))
        say(r, when + 0.0001, REENTRANT[1])
        for j, line in enumerate(TOKENIZERS_FORK):
            say(r, when + 0.5 + j * 0.0001, line)
    say(0, t + 60, "Detected kernel version 5.4.0, which is below the recommended minimum of 5.5.0; this can cause the process to hang. It is recommended to upgrade the kernel to the minimum version or higher.")
    per_step = 4.1
    loss, lr_peak = 1.42, 2e-5
    for step in range(1, total + 1):
        now = t + step * per_step + rng.random() * 0.3
        warm = 37
        lr = lr_peak * step / warm if step <= warm else lr_peak * 0.5 * (1 + __import__("math").cos(3.14159265 * (step - warm) / (total - warm)))
        loss = max(0.55, loss * 0.9985 + rng.gauss(0, 0.03))
        gn = abs(rng.gauss(0.9, 0.25)) + 0.2
        bar = tqdm_line("", [step - 1, step], total, per_step)
        entry = {"loss": round(loss, 4), "grad_norm": round(gn, 6), "learning_rate": float(f"{lr:.12g}"), "epoch": round(3 * step / total, 2)}
        say(0, now, f"{bar}{entry}")
        if step % 200 == 0:
            say(0, now + 0.1, f"[INFO|trainer.py:3719] {py_time(log.when(now + 0.1))} >> ***** Running Evaluation *****")
            say(0, now + 0.1, f"[INFO|trainer.py:3721] {py_time(log.when(now + 0.1))} >>   Num examples = 2000")
            say(0, now + 0.1, f"[INFO|trainer.py:3724] {py_time(log.when(now + 0.1))} >>   Batch size = 8")
            say(0, now + 0.2, tqdm_line("", list(range(0, 32, 4)) + [32], 32, 0.38))
            ev = {"eval_loss": round(loss + 0.07, 4), "eval_runtime": round(12.1 + rng.random(), 4),
                  "eval_samples_per_second": round(160 + rng.random() * 5, 3), "eval_steps_per_second": round(2.6 + rng.random() * 0.1, 3),
                  "epoch": round(3 * step / total, 2)}
            say(0, now + 12.5, f"{ev}")
        if step % 400 == 0:
            ck = f"out/llama2-7b-alpaca/checkpoint-{step}"
            for k, s in enumerate([
                f"[INFO|trainer.py:3410] {py_time(log.when(now + 13))} >> Saving model checkpoint to {ck}",
                f"[INFO|configuration_utils.py:472] {py_time(log.when(now + 13))} >> Configuration saved in {ck}/config.json",
                f"[INFO|configuration_utils.py:731] {py_time(log.when(now + 13))} >> Configuration saved in {ck}/generation_config.json",
                f"[INFO|modeling_utils.py:2627] {py_time(log.when(now + 41))} >> The model is bigger than the maximum size per checkpoint (5GB) and is going to be split in 3 checkpoint shards. You can find where each parameters has been saved in the index located at {ck}/model.safetensors.index.json.",
                f"[INFO|tokenization_utils_base.py:2488] {py_time(log.when(now + 41))} >> tokenizer config file saved in {ck}/tokenizer_config.json",
                f"[INFO|tokenization_utils_base.py:2497] {py_time(log.when(now + 41))} >> Special tokens file saved in {ck}/special_tokens_map.json",
            ]):
                say(0, now + 13 + k * 0.01, s)
    end = t + total * per_step + 50
    say(0, end, f"[INFO|trainer.py:2329] {py_time(log.when(end))} >> ")
    say(0, end, "")
    say(0, end, "Training completed. Do not forget to share your model on huggingface.co/models =)")
    say(0, end, "")
    say(0, end, "")
    runtime = total * per_step + 4
    say(0, end + 0.01, f"{tqdm_line('', [total], total, per_step)}{{'train_runtime': {runtime:.4f}, 'train_samples_per_second': {86320 * 3 / runtime:.3f}, 'train_steps_per_second': {total / runtime:.3f}, 'train_loss': {loss + 0.31:.16f}, 'epoch': 3.0}}")
    say(0, end + 0.02, f"\r100%|██████████| {total}/{total} [{clock(runtime)}<00:00,  {runtime / total:.2f}s/it]")
    for k, s in enumerate([
        "***** train metrics *****", "  epoch                    =        3.0", "  total_flos               = 1175642GF",
        f"  train_loss               =     {loss + 0.31:.4f}", f"  train_runtime            = {clock(runtime)}.{rng.randint(10, 99)}",
        "  train_samples            =      86320", f"  train_samples_per_second =     {86320 * 3 / runtime:.3f}",
        f"  train_steps_per_second   =      {total / runtime:.3f}",
    ]):
        say(0, end + 0.1 + k * 0.0001, s)
    say(0, end + 1, f"[INFO|trainer.py:3410] {py_time(log.when(end + 1))} >> Saving model checkpoint to out/llama2-7b-alpaca")
    say(0, end + 40, f"{BLUE}{BOLD}wandb{RESET}: 🚀 View run {YELLOW}llama2-7b-alpaca{RESET} at: {BLUE}https://wandb.ai/ml-team/alpaca/runs/3kq0z8vd{RESET}")
    say(0, end + 40, f"{BLUE}{BOLD}wandb{RESET}: Synced 6 W&B file(s), 0 media file(s), 2 artifact file(s) and 0 other file(s)")
    for r in range(nranks):
        say(r, end + 42 + r * 0.01, nccl_destroy(host, pids[r], r, r, nranks))
    return log.render()


# ---------------------------------------------------------------- PyTorch Lightning under srun --label


def lightning(rng: random.Random) -> str:
    """A 2-node x 4-GPU Lightning DDP run under srun --label (lines tagged '3: ')."""
    log = Log(datetime(2024, 6, 2, 22, 41, 17, tzinfo=UTC))
    hosts, nranks = ["node-c013", "node-c014"], 8
    pids = [71530 + i * 3 for i in range(nranks)]

    def say(rank: int, when: float, text: str) -> None:
        log.add(when, f"{rank}: {text}")

    log.add(-1.0, "prolog: node-c013 cleaned /dev/shm and /tmp; Killed 0 leftover processes of earlier jobs")
    t = 0.0
    for r in range(nranks):
        say(r, t + r * 0.02, f"{SITE}/lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is available on your system but is not used. HINT: If your intention is to run Lightning on SLURM, prepend your python command with `srun` like so: srun python train.py --trainer.devices 4 ...")
    say(0, 1.9, "SLURM auto-requeueing enabled. Setting signal handlers.")
    say(0, 2.0, "Using 16bit Automatic Mixed Precision (AMP)")
    say(0, 2.01, "GPU available: True (cuda), used: True")
    say(0, 2.01, "TPU available: False, using: 0 TPU cores")
    say(0, 2.01, "IPU available: False, using: 0 IPUs")
    say(0, 2.01, "HPU available: False, using: 0 HPUs")
    for r in range(nranks):
        say(r, 3 + r * 0.03, f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{nranks}")
    for r in range(1, nranks):
        say(r, 3.5 + r * 0.02, ipv6_warning(log.when(3.5 + r * 0.02), hosts[0], 29431))
    say(0, 5.0, "----------------------------------------------------------------------------------------------------")
    say(0, 5.0, "distributed_backend=nccl")
    say(0, 5.0, f"All distributed processes registered. Starting with {nranks} processes")
    say(0, 5.0, "----------------------------------------------------------------------------------------------------")
    say(0, 5.0, "")
    for r in range(nranks):
        node, local = divmod(r, 4)
        for j, line in enumerate(nccl_init(rng, hosts[node], node, pids[r], local, r, nranks, 2)):
            say(r, 6 + r * 0.004 + j * 0.0009, line)
    say(0, 7.5, "You are using a CUDA device ('NVIDIA A100-SXM4-80GB') that has Tensor Cores. To properly utilize them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off precision for performance. For more details, read https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html#torch.set_float32_matmul_precision")
    for r in range(nranks):
        say(r, 8 + r * 0.01, f"LOCAL_RANK: {r % 4} - CUDA_VISIBLE_DEVICES: [0,1,2,3]")
    say(0, 8.5, f"{MAGENTA}wandb{RESET}: logging graph, to disable use `wandb.watch(log_graph=False)`")
    rows = [("0", "model", "GPT", "124 M"), ("1", "model.tok_emb", "Embedding", "38.6 M"), ("2", "model.blocks", "ModuleList", "85.1 M"),
            ("3", "model.ln_f", "LayerNorm", "1.5 K"), ("4", "criterion", "CrossEntropyLoss", "0"), ("5", "train_metrics", "MetricCollection", "0")]
    table = [f"{DIM}┏━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━┓{RESET}",
             f"{DIM}┃{RESET}{BOLD}   {RESET}{DIM}┃{RESET}{BOLD} Name            {RESET}{DIM}┃{RESET}{BOLD} Type             {RESET}{DIM}┃{RESET}{BOLD} Params {RESET}{DIM}┃{RESET}",
             f"{DIM}┡━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━┩{RESET}"]
    for a, b, c, d in rows:
        table.append(f"{DIM}│{RESET}{DIM} {a} {RESET}{DIM}│{RESET} {b:<15} {DIM}│{RESET} {c:<16} {DIM}│{RESET} {d:>6} {DIM}│{RESET}")
    table.append(f"{DIM}└───┴─────────────────┴──────────────────┴────────┘{RESET}")
    table += [f"{BOLD}Trainable params{RESET}: 124 M", f"{BOLD}Non-trainable params{RESET}: 0", f"{BOLD}Total params{RESET}: 124 M",
              f"{BOLD}Total estimated model params size (MB){RESET}: 497"]
    log.extend(9.0, (f"0: {x}" for x in table), 0.0001)
    say(0, 9.1, f"{SITE}/lightning/pytorch/trainer/connectors/data_connector.py:441: The 'val_dataloader' does not have many workers which may be a bottleneck. Consider increasing the value of the `num_workers` argument` to `num_workers=15` in the `DataLoader` to improve performance.")
    say(0, 9.15, f"{SITE}/torch/utils/data/dataloader.py:558: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.")
    say(0, 9.15, "  warnings.warn(_create_warning_msg(")
    say(0, 9.2, "Sanity Checking: |          | 0/? [00:00<?, ?it/s]\rSanity Checking:   0%|          | 0/2 [00:00<?, ?it/s]\rSanity Checking DataLoader 0:  50%|█████     | 1/2 [00:00<00:00,  3.11it/s]\rSanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00,  5.87it/s]")
    steps, epochs, per_step = 1500, 4, 0.231
    loss = 10.9
    t = 12.0
    best = 99.0
    for ep in range(epochs):
        pts: list[int] = []
        for step in range(1, steps + 1):
            now = t + step * per_step
            loss = max(2.9, loss * 0.9988 - 0.0008 + rng.gauss(0, 0.012))
            if step % 50 == 0:
                pts.append(step)
            if step % 3 == 0:
                gs = ep * steps + step
                say(0, now, f"{py_time(log.when(now))} INFO [lit_gpt.py:211] epoch={ep} step={gs} loss={loss:.4f} lr={6e-4 * min(1.0, gs / 500):.3e} nan_count=0 inf_count=0 tok/s={int(rng.gauss(421000, 6000))}")
            if step % 500 == 0:
                say(0, now + 0.01, f"{py_time(log.when(now + 0.01))} INFO [lit_gpt.py:230] grad clip stats: max_norm=1.0 norm_type=2.0 error_if_nonfinite=False clipped=0.{rng.randint(10, 40)}")
        v = round(loss, 3)
        post = f", v_num=3, train_loss={v}"
        line = "\r" + "\r".join(tqdm_bar(f"Epoch {ep}", n, steps, n * per_step, f", v_num=3, train_loss={loss + 0.1 * (steps - n) / steps:.3f}") for n in pts)
        t_end = t + steps * per_step
        val_pts = [0, 40, 80, 120, 160]
        val = "\r" + "\r".join(tqdm_bar("Validation DataLoader 0", n, 160, n * 0.08) for n in val_pts)
        say(0, t_end, line + "\r" + tqdm_bar(f"Epoch {ep}", steps, steps, steps * per_step, post) + val)
        val_loss = loss + 0.04
        say(0, t_end + 13, f"\rEpoch {ep}: 100%|██████████| {steps}/{steps} [{clock(steps * per_step + 13)}<00:00,  {steps / (steps * per_step + 13):.2f}it/s{post}, val_loss={val_loss:.3f}]")
        if val_loss < best:
            best = val_loss
            say(0, t_end + 13.1, f"Epoch {ep}, global step {(ep + 1) * steps}: 'val_loss' reached {val_loss:.5f} (best {best:.5f}), saving model to '/scratch/ckpt/gpt124m/epoch={ep}-step={(ep + 1) * steps}.ckpt' as top 1")
        t = t_end + 20
    say(0, t, f"`Trainer.fit` stopped: `max_epochs={epochs}` reached.")
    say(0, t + 0.5, f"{MAGENTA}wandb{RESET}: Waiting for W&B process to finish... {GREEN}(success).{RESET}")
    say(0, t + 1.5, f"{MAGENTA}wandb{RESET}: Run summary:")
    say(0, t + 1.5, f"{MAGENTA}wandb{RESET}:           epoch {epochs - 1}")
    say(0, t + 1.5, f"{MAGENTA}wandb{RESET}:      train_loss {loss:.5f}")
    say(0, t + 1.5, f"{MAGENTA}wandb{RESET}:        val_loss {best:.5f}")
    say(0, t + 1.5, f"{MAGENTA}wandb{RESET}:       nan_count 0")
    say(0, t + 2, "Training finished: 4 epochs, best val_loss %.4f; 0 errors." % best)
    for r in range(nranks):
        node, local = divmod(r, 4)
        say(r, t + 3 + r * 0.01, nccl_destroy(hosts[node], pids[r], local, r, nranks))
    return log.render()


# ---------------------------------------------------------------- Megatron-LM under mpirun --tag-output


def megatron(rng: random.Random) -> str:
    """A 64-rank Megatron-LM GPT pretraining run (TP 4, PP 2, DP 8) under mpirun --tag-output."""
    log = Log(datetime(2024, 3, 9, 3, 5, 44, tzinfo=UTC))
    nranks, nnodes = 64, 8
    hosts = [f"dgx{n:03d}" for n in range(21, 21 + nnodes)]
    pids = [90210 + (r % 8) * 11 + (r // 8) * 1000 for r in range(nranks)]
    last = nranks - 1

    def out(rank: int, when: float, text: str) -> None:
        log.add(when, f"[1,{rank}]<stdout>:{text}")

    def err(rank: int, when: float, text: str) -> None:
        log.add(when, f"[1,{rank}]<stderr>:{text}")

    for r in range(nranks):
        err(r, 0.1 + r * 0.001, "/usr/lib/python3/dist-packages/requests/__init__.py:87: RequestsDependencyWarning: urllib3 (2.0.7) or chardet (5.2.0)/charset_normalizer (2.0.12) doesn't match a supported version!")
        err(r, 0.1 + r * 0.001 + 1e-5, "  warnings.warn(\"urllib3 ({}) or chardet ({}) doesn't match a supported \"")
        err(r, 11 + r * 0.002, "[W init.cpp:767] Warning: nvfuser is no longer supported in torch script, use _jit_set_nvfuser_enabled is deprecated and a no-op (function operator())")
    out(0, 0.5, "using world size: 64, data-parallel size: 8, context-parallel size: 1 tensor-model-parallel size: 4, pipeline-model-parallel size: 2 ")
    out(0, 0.5, "using torch.float16 for parameters ...")
    out(0, 0.5, "------------------------ arguments ------------------------")
    margs = {
        "accumulate_allreduce_grads_in_fp32": "False", "adam_beta1": "0.9", "adam_beta2": "0.95", "adam_eps": "1e-08",
        "apply_query_key_layer_scaling": "False", "attention_dropout": "0.1", "bf16": "False", "check_for_nan_in_loss_and_grad": "True",
        "clip_grad": "1.0", "data_path": "['/lustre/data/pile/pile_text_document']", "distributed_backend": "nccl",
        "distributed_timeout_minutes": "10", "eval_interval": "1000", "eval_iters": "10", "exit_on_missing_checkpoint": "False",
        "ffn_hidden_size": "8192", "fp16": "True", "global_batch_size": "512", "hidden_dropout": "0.1", "hidden_size": "2048",
        "hysteresis": "2", "init_method_std": "0.02", "initial_loss_scale": "4294967296", "load": "None",
        "log_interval": "10", "log_num_zeros_in_grad": "False", "loss_scale": "None", "loss_scale_window": "1000",
        "lr": "0.0002", "lr_decay_style": "cosine", "lr_warmup_iters": "500", "make_vocab_size_divisible_by": "128",
        "max_position_embeddings": "2048", "micro_batch_size": "4", "min_loss_scale": "1.0", "min_lr": "2e-05",
        "num_attention_heads": "16", "num_layers": "24", "num_workers": "2", "optimizer": "adam",
        "pipeline_model_parallel_size": "2", "save": "/lustre/ckpt/gpt-1.3b", "save_interval": "1000", "seed": "1234",
        "seq_length": "2048", "sequence_parallel": "True", "split": "949,50,1", "tensor_model_parallel_size": "4",
        "tokenizer_type": "GPT2BPETokenizer", "train_iters": "5000", "use_distributed_optimizer": "True",
        "use_flash_attn": "True", "vocab_file": "/lustre/data/gpt2-vocab.json", "weight_decay": "0.1", "world_size": "64",
    }
    for i, (k, v) in enumerate(margs.items()):
        out(0, 0.5 + i * 1e-5, f"  {k} {'.' * (46 - len(k))} {v}")
    out(0, 0.51, "-------------------- end of arguments ---------------------")
    out(0, 0.6, "setting number of micro-batches to constant 16")
    out(0, 0.6, "> building GPT2BPETokenizer tokenizer ...")
    out(0, 0.9, " > padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)")
    out(0, 0.9, "> initializing torch distributed ...")
    for r in range(nranks):
        node, local = divmod(r, 8)
        for j, line in enumerate(nccl_init(rng, hosts[node], node, pids[r], local, r, nranks, nnodes)):
            out(r, 2 + r * 0.002 + j * 0.0003, line)
    out(0, 4.0, "> initialized tensor model parallel with size 4")
    out(0, 4.0, "> initialized pipeline model parallel with size 2")
    out(0, 4.0, "> setting random seeds to 1234 ...")
    out(0, 4.1, "> compiling dataset index builder ...")
    out(0, 4.1, "make: Entering directory '/workspace/Megatron-LM/megatron/core/datasets'")
    out(0, 4.1, "make: Nothing to be done for 'default'.")
    out(0, 4.1, "make: Leaving directory '/workspace/Megatron-LM/megatron/core/datasets'")
    out(0, 4.2, ">>> done with dataset index builder. Compilation time: 0.061 seconds")
    out(0, 4.2, "> compiling and loading fused kernels ...")
    out(0, 9.8, ">>> done with compiling and loading fused kernels. Compilation time: 5.611 seconds")
    for r in range(nranks):
        err(r, 10 + r * 0.01, f"{SITE}/transformer_engine/pytorch/module/base.py:611: UserWarning: To guarantee overlapping TP and SP collectives with the backward GEMMs, set environment variable CUDA_DEVICE_MAX_CONNECTIONS = 1")
        err(r, 10 + r * 0.01 + 1e-4, "  warnings.warn(")
    out(0, 12, "time to initialize megatron (seconds): 21.733")
    out(0, 12, "[after megatron is initialized] datetime: 2024-03-09 03:05:56 ")
    out(0, 12.1, "building GPT model ...")
    for tp in range(4):
        for pp in range(2):
            out(tp + pp * 32, 12.5 + tp * 0.01, f" > number of parameters on (tensor, pipeline) model parallel rank ({tp}, {pp}): {170012672 if pp == 0 else 183107584}")
    out(0, 13, "> buckets for gradient all-reduce / reduce-scatter:")
    out(0, 13, "    params for bucket 1 (170012672 elements):")
    out(0, 13, "> learning rate decay style: cosine")
    out(0, 13.2, "WARNING: could not find the metadata file /lustre/ckpt/gpt-1.3b/latest_checkpointed_iteration.txt ")
    out(0, 13.2, "    will not load any checkpoints and will start from random")
    out(0, 13.3, "(min, max) time across ranks (ms):")
    out(0, 13.3, "    load-checkpoint ................................: (1.42, 2.07)")
    out(0, 13.4, "[after model, optimizer, and learning rate scheduler are built] datetime: 2024-03-09 03:05:58 ")
    out(0, 13.5, "> building train, validation, and test datasets ...")
    out(0, 13.5, " > datasets target sizes (minimum size):")
    out(0, 13.5, "    train:      2560000")
    out(0, 13.5, "    validation: 30720")
    out(0, 13.5, "    test:       5120")
    out(0, 14.8, "> finished creating GPT datasets ...")
    out(0, 14.9, "[after dataloaders are built] datetime: 2024-03-09 03:05:59 ")
    out(0, 14.9, "done with setup ...")
    out(0, 14.9, "(min, max) time across ranks (ms):")
    out(0, 14.9, "    model-and-optimizer-setup ......................: (1411.03, 1452.87)")
    out(0, 14.9, "    train/valid/test-data-iterators-setup ..........: (1295.44, 1337.21)")
    out(0, 15, "training ...")
    out(0, 15, "[before the start of training step] datetime: 2024-03-09 03:05:59 ")
    iters, interval, per_iter = 5000, 10, 1.87
    scale = 4294967296.0
    loss = 10.95
    t = 15.0
    consumed = 0
    for it in range(interval, iters + 1, interval):
        now = t + it * per_iter + rng.random()
        skipped = 0
        if it <= 30:
            skipped = 6 if it == 10 else (5 if it == 20 else 4)
            scale /= 2**skipped
        consumed += 512 * interval
        loss = max(2.35, loss * 0.9982 - 0.002 + rng.gauss(0, 0.01))
        lr = 2e-4 * min(1.0, it / 500)
        gn = abs(rng.gauss(0.45, 0.08)) + (2.0 if it <= 40 else 0.0)
        ms = per_iter * 1000 + rng.gauss(0, 15)
        out(last, now, f" [{log.when(now).strftime('%Y-%m-%d %H:%M:%S')}] iteration {it:8d}/{iters:8d} | consumed samples: {consumed:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {rng.gauss(142, 2):.1f} | learning rate: {lr:.6E} | global batch size:   512 | lm loss: {loss:.6E} | loss scale: {scale:.1f} | grad norm: {gn:.3f} | number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |")
        if it == interval:
            for r in (last - 3, last - 2, last - 1, last):
                out(r, now + 0.01 * (r - last + 4), f"[Rank {r}] (after {interval} iterations) memory (MB) | allocated: {16012.3 + r:.1f} | max allocated: {30877.9 + r:.1f} | reserved: {33914.0:.1f} | max reserved: {33914.0:.1f}")
        if it % 100 == 0:
            timers = [("forward-backward", 1702.3), ("forward-compute", 520.4), ("backward-compute", 1101.7), ("batch-generator", 1.9),
                      ("layernorm-grads-all-reduce", 0.02), ("embedding-grads-all-reduce", 0.03), ("all-grads-sync", 48.7),
                      ("params-all-gather", 21.3), ("optimizer-copy-to-main-grad", 4.1), ("optimizer-unscale-and-check-inf", 9.8),
                      ("optimizer-clip-main-grad", 6.2), ("optimizer-count-zeros", 0.0), ("optimizer-inner-step", 11.4),
                      ("optimizer-copy-main-to-model-params", 3.9), ("optimizer", 38.6)]
            out(0, now + 0.02, "(min, max) time across ranks (ms):")
            for j, (name, base) in enumerate(timers):
                lo = base * (1 + rng.random() * 0.01)
                out(0, now + 0.02 + j * 1e-5, f"    {name} {'.' * (48 - len(name))}: ({lo:.2f}, {lo * (1 + rng.random() * 0.03):.2f})")
        if it % 1000 == 0:
            out(last, now + 20, "-" * 109)
            out(last, now + 20, f" validation loss at iteration {it} | lm loss value: {loss + 0.05:.6E} | lm loss PPL: {2.718281828 ** (loss + 0.05):.6E} | ")
            out(last, now + 20, "-" * 109)
            out(0, now + 21, f"saving checkpoint at iteration {it:7d} to /lustre/ckpt/gpt-1.3b in torch format")
            out(0, now + 48, f"  successfully saved checkpoint from iteration {it:7d} to /lustre/ckpt/gpt-1.3b [ t 1/4, p 1/2 ]")
            out(0, now + 48.5, "(min, max) time across ranks (ms):")
            out(0, now + 48.5, f"    save-checkpoint ................................: ({27012.5 + rng.random() * 50:.2f}, {27310.9 + rng.random() * 50:.2f})")
            t += 50
    end = t + iters * per_iter + 5
    out(0, end, f"[after training is done] datetime: {log.when(end).strftime('%Y-%m-%d %H:%M:%S')} ")
    out(last, end + 14, "-" * 111)
    out(last, end + 14, f" validation loss at iteration {iters} on validation set | lm loss value: {loss + 0.05:.6E} | lm loss PPL: {2.718281828 ** (loss + 0.05):.6E} | ")
    out(last, end + 14, "-" * 111)
    out(last, end + 16, f" validation loss at iteration {iters} on test set | lm loss value: {loss + 0.06:.6E} | lm loss PPL: {2.718281828 ** (loss + 0.06):.6E} | ")
    for r in range(nranks):
        node, local = divmod(r, 8)
        out(r, end + 20 + r * 0.002, nccl_destroy(hosts[node], pids[r], local, r, nranks))
    return log.render()


# ---------------------------------------------------------------- DeepSpeed over pdsh


def deepspeed(rng: random.Random) -> str:
    """A 2-node x 8-GPU DeepSpeed ZeRO-2 fp16 run; pdsh prefixes every remote line with its host."""
    log = Log(datetime(2024, 9, 18, 14, 2, 55, 402000, tzinfo=UTC))
    hosts, nranks = ["worker-0", "worker-1"], 16
    pids = [[30411 + i for i in range(8)], [28870 + i for i in range(8)]]

    def ds(when: float, where: str, text: str, level: str = "INFO") -> str:
        return f"[{py_time(log.when(when))}] [{level}] [{where}] {text}"

    def remote(node: int, when: float, text: str) -> None:
        log.add(when, f"{hosts[node]}: {text}")

    log.add(0, ds(0, "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"))
    log.add(1.2, ds(1.2, "runner.py:463:main", "Using IP address of 10.20.0.4 for node worker-0"))
    log.add(1.2, ds(1.2, "multinode_runner.py:80:get_cmd", "Running on the following workers: worker-0,worker-1"))
    log.add(1.2, ds(1.2, "runner.py:568:main", "cmd = pdsh -S -f 1024 -w worker-0,worker-1 export PYTHONPATH=/workspace; export NCCL_DEBUG=INFO; export NCCL_IB_HCA=mlx5;  cd /workspace; /opt/conda/bin/python -u -m deepspeed.launcher.launch --world_info=eyJ3b3JrZXItMCI6IFswLCAxLCAyLCAzLCA0LCA1LCA2LCA3XSwgIndvcmtlci0xIjogWzAsIDEsIDIsIDMsIDQsIDUsIDYsIDddfQ== --node_rank=%n --master_addr=10.20.0.4 --master_port=29500 train_sft.py --deepspeed ds_zero2.json --model mistral-7b --epochs 2"))
    for node in range(2):
        b = 3 + node * 0.2
        remote(node, b, ds(b, "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"))
        remote(node, b + 0.1, " [WARNING]  async_io requires the dev libaio .so object and headers but these were not found.")
        remote(node, b + 0.1, " [WARNING]  async_io: please install the libaio-dev package with apt")
        remote(node, b + 0.1, " [WARNING]  If libaio is already installed (perhaps from source), try setting the CFLAGS and LDFLAGS environment variables to where it can be found.")
        remote(node, b + 0.1, " [WARNING]  Please specify the CUTLASS repo directory as environment variable $CUTLASS_PATH")
        remote(node, b + 0.1, " [WARNING]  sparse_attn requires a torch version >= 1.5 and < 2.0 but detected 2.3")
        remote(node, b + 0.1, " [WARNING]  using untested triton version (2.3.0), only 1.0.0 is known to be compatible")
        remote(node, b + 0.2, ds(b + 0.2, "cache_utils.py:45:__init__", "The cache directory for DeepSpeed Triton autotune, /home/mlops/.triton/autotune, appears to be on an NFS system. While this is generally acceptable, if you experience slowdowns or hanging when DeepSpeed exits, it is recommended to set the TRITON_CACHE_DIR environment variable to a non-NFS path.", "WARNING"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:146:main", "WORLD INFO DICT: {'worker-0': [0, 1, 2, 3, 4, 5, 6, 7], 'worker-1': [0, 1, 2, 3, 4, 5, 6, 7]}"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:152:main", f"nnodes=2, num_local_procs=8, node_rank={node}"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:163:main", "global_rank_mapping=defaultdict(<class 'list'>, {'worker-0': [0, 1, 2, 3, 4, 5, 6, 7], 'worker-1': [8, 9, 10, 11, 12, 13, 14, 15]})"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:164:main", "dist_world_size=16"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:166:main", "Setting CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"))
        remote(node, b + 0.3, ds(b + 0.3, "launch.py:253:main", "process 0 spawned with command: ['/opt/conda/bin/python', '-u', 'train_sft.py', '--local_rank=0', '--deepspeed', 'ds_zero2.json', '--model', 'mistral-7b', '--epochs', '2']"))
    for node in range(2):
        b = 5 + node * 0.1
        remote(node, b, "Using /root/.cache/torch_extensions/py310_cu121 as PyTorch extensions root...")
        if node == 0:
            remote(node, b, "Detected CUDA files, patching ldflags")
            remote(node, b, "Emitting ninja build file /root/.cache/torch_extensions/py310_cu121/fused_adam/build.ninja...")
            remote(node, b, f"{SITE}/torch/utils/cpp_extension.py:1967: UserWarning: TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation. ")
            remote(node, b, "If this is not desired, please set os.environ['TORCH_CUDA_ARCH_LIST'].")
            remote(node, b, "  warnings.warn(")
            remote(node, b, "Building extension module fused_adam...")
            remote(node, b, "Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)")
            remote(node, b, "ninja: no work to do.")
        remote(node, b + 0.6, "Loading extension module fused_adam...")
        remote(node, b + 0.6, f"Time to load fused_adam op: {0.47 + node * 0.03:.4f} seconds")
    for r in range(nranks):
        node, local = divmod(r, 8)
        b = 8 + r * 0.05
        remote(node, b, ds(b, "comm.py:637:init_distributed", "cdb=None"))
        if r == 0:
            remote(node, b, ds(b, "comm.py:668:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl"))
        remote(node, b + 0.5, ipv6_warning(log.when(b + 0.5), "worker-0", 29500))
    for r in range(nranks):
        node, local = divmod(r, 8)
        for j, line in enumerate(nccl_init(rng, hosts[node], node, pids[node][local], local, r, nranks, 2)):
            remote(node, 10 + r * 0.004 + j * 0.0006, line)
    b = 14.0
    for i, (where, text) in enumerate([
        ("logging.py:96:log_dist", "[Rank 0] DeepSpeed info: version=0.14.2, git-hash=unknown, git-branch=unknown"),
        ("logging.py:96:log_dist", "[Rank 0] DeepSpeed Flops Profiler Enabled: False"),
        ("logging.py:96:log_dist", "[Rank 0] Using DeepSpeed Optimizer param name adamw as basic optimizer"),
        ("logging.py:96:log_dist", "[Rank 0] Removing param_group that has no 'params' in the basic Optimizer"),
        ("logging.py:96:log_dist", "[Rank 0] DeepSpeed Basic Optimizer = AdamW"),
        ("utils.py:56:is_zero_supported_optimizer", "Checking ZeRO support for optimizer=AdamW type=<class 'torch.optim.adamw.AdamW'>"),
        ("logging.py:96:log_dist", "[Rank 0] Creating torch.float16 ZeRO stage 2 optimizer"),
        ("stage_1_and_2.py:148:__init__", "Reduce bucket size 500000000"),
        ("stage_1_and_2.py:149:__init__", "Allgather bucket size 500000000"),
        ("stage_1_and_2.py:150:__init__", "CPU Offload: False"),
        ("stage_1_and_2.py:151:__init__", "Round robin gradient partitioning: False"),
        ("utils.py:781:see_memory_usage", "Before initializing optimizer states"),
        ("utils.py:782:see_memory_usage", "MA 14.48 GB         Max_MA 15.38 GB         CA 15.5 GB         Max_CA 16 GB "),
        ("utils.py:789:see_memory_usage", "CPU Virtual Memory:  used = 151.27 GB, percent = 7.5%"),
        ("utils.py:781:see_memory_usage", "After initializing optimizer states"),
        ("utils.py:782:see_memory_usage", "MA 17.18 GB         Max_MA 18.98 GB         CA 19.11 GB         Max_CA 19 GB "),
        ("stage_1_and_2.py:543:__init__", "optimizer state initialized"),
        ("logging.py:96:log_dist", "[Rank 0] DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer"),
        ("logging.py:96:log_dist", "[Rank 0] DeepSpeed using configured LR scheduler = WarmupDecayLR"),
        ("config.py:997:print", "DeepSpeedEngine configuration:"),
    ]):
        remote(0, b + i * 0.01, ds(b + i * 0.01, where, text))
    conf = {
        "activation_checkpointing_config": '{\n"partition_activations": false, \n"contiguous_memory_optimization": false, \n"cpu_checkpointing": false, \n"number_checkpoints": null, \n"synchronize_checkpoint_boundary": false, \n"profile": false\n}',
        "amp_enabled": "False", "bfloat16_enabled": "False", "checkpoint_parallel_write_pipeline": "False",
        "checkpoint_tag_validation_enabled": "True", "checkpoint_tag_validation_fail": "False",
        "communication_data_type": "None", "curriculum_enabled_legacy": "False", "dataloader_drop_last": "False",
        "disable_allgather": "False", "dump_state": "False", "dynamic_loss_scale_args": "{'init_scale': 4294967296, 'scale_window': 1000, 'delayed_shift': 2, 'consecutive_hysteresis': False, 'min_scale': 1}",
        "elasticity_enabled": "False", "fp16_auto_cast": "False", "fp16_enabled": "True", "global_rank": "0",
        "grad_accum_dtype": "None", "gradient_accumulation_steps": "4", "gradient_clipping": "1.0",
        "gradient_predivide_factor": "1.0", "initial_dynamic_scale": "4294967296", "loss_scale": "0",
        "optimizer_name": "adamw", "optimizer_params": "{'lr': 1e-05, 'betas': [0.9, 0.95], 'eps': 1e-08, 'weight_decay': 0.0}",
        "prescale_gradients": "False", "scheduler_name": "WarmupDecayLR",
        "scheduler_params": "{'warmup_min_lr': 0, 'warmup_max_lr': 1e-05, 'warmup_num_steps': 50, 'total_num_steps': 1600}",
        "steps_per_print": "10", "train_batch_size": "128", "train_micro_batch_size_per_gpu": "2", "wall_clock_breakdown": "False",
        "zero_allow_untested_optimizer": "False", "zero_enabled": "True", "zero_force_ds_cpu_optimizer": "True",
        "zero_optimization_stage": "2",
    }
    i = 0
    for k, v in conf.items():
        for j, part in enumerate(v.split("\n")):
            text = f"  {k:<30} {part}" if j == 0 else part
            remote(0, b + 0.3 + i * 1e-4, ds(b + 0.3, "config.py:1001:print", text) if j == 0 else text)
            i += 1
    remote(0, b + 0.4, ds(b + 0.4, "config.py:987:print_user_config", '  json = {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "fp16": {"enabled": true, "initial_scale_power": 32, "loss_scale_window": 1000, "hysteresis": 2}, "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true}, "gradient_clipping": 1.0, "steps_per_print": 10}'))
    remote(0, b + 0.5, "[train_sft.py] tip: if a rank runs out of memory, lower train_micro_batch_size_per_gpu or set zero_optimization.offload_optimizer.device=cpu")
    for r in range(nranks):
        node, local = divmod(r, 8)
        remote(node, b + 1 + r * 0.02, REENTRANT[0].format(site=SITE))
        remote(node, b + 1 + r * 0.02 + 1e-4, REENTRANT[1])
    total, per_step = 1600, 2.35
    scale = 4294967296
    loss = 1.78
    skipped = 0
    t = 16.0
    for step in range(1, total + 1):
        now = t + step * per_step + rng.random() * 0.1
        if step <= 6:
            skipped += 1
            remote(0, now, ds(now, "loss_scaler.py:183:update_scale", f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}"))
            scale //= 2
            continue
        loss = max(0.62, loss * 0.9978 + rng.gauss(0, 0.02))
        remote(0, now + 0.01, f"{py_time(log.when(now))} - INFO - train_sft - epoch {2 * step // total} step {step}/{total} loss {loss:.4f} grad_norm {abs(rng.gauss(0.7, 0.15)):.4f} scale {scale} overflow_steps=0")
        if step % 10 == 0:
            lr = 1e-5 * min(1.0, step / 50)
            remote(0, now + 0.02, ds(now + 0.02, "logging.py:96:log_dist", f"[Rank 0] step={step}, skipped={skipped}, lr=[{lr}], mom=[(0.9, 0.95)]"))
            remote(0, now + 0.03, ds(now + 0.03, "timer.py:260:stop", f"epoch=0/micro_step={step * 4}/global_step={step}, RunningAvgSamplesPerSec={128 / per_step + rng.gauss(0, 0.3):.4f}, CurrSamplesPerSec={128 / per_step + rng.gauss(0, 0.8):.4f}, MemAllocated=17.3GB, MaxMemAllocated=31.12GB"))
        if step % 400 == 0:
            tag = f"global_step{step}"
            for r in range(nranks):
                node, local = divmod(r, 8)
                w = now + 1 + r * 0.03
                remote(node, w, ds(w, "logging.py:96:log_dist", f"[Rank {r}] Saving model checkpoint: /ckpt/mistral-sft/{tag}/mp_rank_00_model_states.pt") if r == 0 else
                       ds(w, "engine.py:3545:_save_zero_checkpoint", f"zero checkpoint saved /ckpt/mistral-sft/{tag}/fp16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
            remote(0, now + 9, ds(now + 9, "torch_checkpoint_engine.py:33:commit", f"[Torch] Checkpoint {tag} is ready now!"))
    end = t + total * per_step + 10
    remote(0, end, f"{py_time(log.when(end))} - INFO - train_sft - Training completed in {clock(total * per_step)}; final loss {loss:.4f}; 0 NaN/Inf steps after loss-scale warmup")
    for r in range(nranks):
        node, local = divmod(r, 8)
        remote(node, end + 2 + r * 0.01, nccl_destroy(hosts[node], pids[node][local], local, r, nranks))
    for node in range(2):
        for local in range(8):
            w = end + 5 + node * 0.3 + local * 0.01
            remote(node, w, ds(w, "launch.py:351:main", f"Process {pids[node][local]} exits successfully."))
    return log.render()


# ---------------------------------------------------------------- plain DDP under torchrun, [rankN]:


def torchrun_ddp(
    rng: random.Random,
    *,
    benign: bool = True,
    steps: int = 3000,
    nodes: int = 2,
    finish: bool = True,
    planned: int | None = None,
) -> str:
    """A custom DDP training loop under torchrun; rank output carries the [rankN]: prefix.

    ``planned`` is the total the step lines count towards (``steps`` by default): a run cut off
    mid-training has not reached it.

    ``benign=False`` leaves out the warnings that benign signatures name (IPv6 fallback,
    tokenizers fork), so the text can be placed in front of a failure excerpt without
    offering a competing line; ``finish=False`` stops mid-run, before the success lines.
    """
    log = Log(datetime(2024, 11, 4, 7, 30, 12, 5000, tzinfo=UTC))
    local_n = 8
    nranks = nodes * local_n
    hosts = [f"trn-{n:02d}" for n in range(1, nodes + 1)]
    pids = [[61001 + n * 500 + i * 7 for i in range(local_n)] for n in range(nodes)]

    def launcher(when: float, level: str, where: str, text: str) -> None:
        log.add(when, f"{glog_head(level, log.when(when), 139911, where)} {text}")

    def say(rank: int, when: float, text: str) -> None:
        log.add(when, f"[rank{rank}]:{text}")

    launcher(0.0, "W", "torch/distributed/run.py:779", "")
    launcher(0.0, "W", "torch/distributed/run.py:779", "*****************************************")
    launcher(0.0, "W", "torch/distributed/run.py:779", omp_banner()[1])
    launcher(0.0, "W", "torch/distributed/run.py:779", "*****************************************")
    launcher(0.2, "I", "torch/distributed/launcher/api.py:188", "Starting elastic_operator with launch configs:")
    for i, s in enumerate(["  entrypoint       : train.py", f"  min_nodes        : {nodes}", f"  max_nodes        : {nodes}",
                           f"  nproc_per_node   : {local_n}", "  run_id           : job-5521", "  rdzv_backend     : c10d",
                           f"  rdzv_endpoint    : {hosts[0]}:29400", "  rdzv_configs     : {'timeout': 900}", "  max_restarts     : 0",
                           "  monitor_interval : 0.1", "  log_dir          : /tmp/torchelastic_q1w2e3r4", "  metrics_cfg      : {}"]):
        launcher(0.2 + i * 1e-5, "I", "torch/distributed/launcher/api.py:188", s)
    launcher(0.5, "I", "torch/distributed/elastic/agent/server/api.py:825", "[default] starting workers for entrypoint: python")
    launcher(0.5, "I", "torch/distributed/elastic/agent/server/api.py:646", "[default] Rendezvous'ing worker group")
    launcher(1.5, "I", "torch/distributed/elastic/agent/server/api.py:512", "[default] Rendezvous complete for workers. Result:")
    for i, s in enumerate(["  restart_count=0", f"  master_addr={hosts[0]}", "  master_port=29500", "  group_rank=0",
                           f"  group_world_size={nodes}", f"  local_ranks={list(range(local_n))}", f"  role_ranks={list(range(local_n))}",
                           f"  global_ranks={list(range(local_n))}", f"  role_world_sizes={[nranks] * local_n}",
                           f"  global_world_sizes={[nranks] * local_n}"]):
        launcher(1.5 + i * 1e-5, "I", "torch/distributed/elastic/agent/server/api.py:520", s)
    launcher(1.6, "I", "torch/distributed/elastic/agent/server/api.py:654", "[default] Starting worker group")
    launcher(1.6, "I", "torch/distributed/elastic/agent/server/local_elastic_agent.py:184", "Environment variable 'TORCHELASTIC_ENABLE_FILE_TIMER' not found. Do not start FileTimerServer.")
    launcher(1.6, "I", "torch/distributed/elastic/agent/server/local_elastic_agent.py:216", "Environment variable 'TORCHELASTIC_HEALTH_CHECK_PORT' not found. Do not start health check.")
    launcher(1.6, "I", "torch/distributed/elastic/multiprocessing/errors/__init__.py:362", "ErrorHandler registered for torch.distributed.elastic child processes (fault file: /tmp/torchelastic_q1w2e3r4/attempt_0/error.json)")
    for r in range(nranks):
        w = 4 + r * 0.02
        say(r, w, f"{py_time(log.when(w))} - INFO - train - rank {r}/{nranks} on {hosts[r // local_n]} cuda:{r % local_n}; seed {1337 + r}")
        if benign and r % local_n != 0:
            say(r, w + 0.3, ipv6_warning(log.when(w + 0.3), hosts[0], 29500))
    config = ["model: gpt2-medium", "seq_len: 1024", "micro_batch: 8", "grad_accum: 2", "optimizer: adamw(lr=3.0e-4, betas=(0.9, 0.95), weight_decay=0.1)",
              "amp: bf16", "grad_clip: {max_norm: 1.0, norm_type: 2.0, error_if_nonfinite: False}", "checkpoint_every: 500",
              "data: /datasets/owt/tokenized (dataset cache: /datasets/owt/nanogpt_owt_train.bin)", "eval_every: 250", "log_every: 2"]
    say(0, 5.0, f"{py_time(log.when(5.0))} - INFO - train - config:")
    for i, c in enumerate(config):
        say(0, 5.0 + i * 1e-5, f"    {c}")
    for r in range(nranks):
        node, local = divmod(r, local_n)
        w = 6 + r * 0.003
        say(r, w, f"{glog_head('I', log.when(w), pids[node][local] + 2, 'ProcessGroupNCCL.cpp:851')} [PG 0 Rank {r}] ProcessGroupNCCL initialization options: size: {nranks}, global rank: {r}, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: 0")
        say(r, w + 1e-4, f"{glog_head('I', log.when(w), pids[node][local] + 2, 'ProcessGroupNCCL.cpp:860')} [PG 0 Rank {r}] ProcessGroupNCCL environments: NCCL version: 2.20.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 3, TORCH_NCCL_DUMP_ON_TIMEOUT: 0, TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC: 60000, TORCH_NCCL_DESYNC_DEBUG: 0, TORCH_NCCL_ENABLE_TIMING: 0, TORCH_NCCL_BLOCKING_WAIT: 0, TORCH_DISTRIBUTED_DEBUG: OFF, TORCH_NCCL_ENABLE_MONITORING: 1, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: 600, TORCH_NCCL_TRACE_BUFFER_SIZE: 0, TORCH_NCCL_COORD_CHECK_MILSEC: 1000, TORCH_NCCL_NAN_CHECK: 0")
        for j, line in enumerate(nccl_init(rng, hosts[node], node, pids[node][local], local, r, nranks, nodes)):
            say(r, 7 + r * 0.004 + j * 0.0004, line)
    for r in range(nranks):
        w = 9 + r * 0.01
        say(r, w, f"{SITE}/torch/amp/grad_scaler.py:131: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.")
        say(r, w + 1e-4, "  scaler = torch.cuda.amp.GradScaler(enabled=False)")
        if benign and r % local_n == 0:
            for j, line in enumerate(TOKENIZERS_FORK):
                say(r, w + 0.5 + j * 1e-5, line)
        say(r, 10 + r * 0.01, f"{glog_head('I', log.when(10 + r * 0.01), 139900 + r, 'reducer.cpp:1983')} Reducer buckets have been rebuilt in this iteration.")
    say(0, 9.5, f"{SITE}/torch/_inductor/compile_fx.py:150: UserWarning: TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. Consider setting `torch.set_float32_matmul_precision('high')` for better performance.")
    say(0, 9.5, "  warnings.warn(")
    per_step, loss = 0.412, 10.8
    t = 11.0
    for step in range(1, steps + 1):
        now = t + step * per_step + rng.random() * 0.05
        loss = max(2.8, loss * 0.9986 - 0.001 + rng.gauss(0, 0.015))
        if step % 2 == 0:
            say(0, now, f"{py_time(log.when(now))} - INFO - train - step {step:5d}/{planned or steps} | loss {loss:.4f} | lr {3e-4 * min(1, step / 200):.3e} | grad_norm {abs(rng.gauss(0.35, 0.06)):.3f} | nan_count=0 | {rng.gauss(143.0, 1.5):.1f} ms/step | mfu {rng.gauss(41.2, 0.4):.2f}%")
        if step % 250 == 0:
            say(0, now + 0.1, f"{py_time(log.when(now + 0.1))} - INFO - eval - step {step}: val_loss {loss + 0.03:.4f} val_ppl {2.718281828 ** (loss + 0.03):.2f} (40 batches, 0 skipped)")
            if step == 750:
                say(0, now + 0.2, f"{py_time(log.when(now + 0.2))} - WARNING - eval - sample generation: caught UnicodeDecodeError while detokenizing sample 3, replaced invalid bytes; continuing")
        if step % 500 == 0:
            say(0, now + 0.3, f"{py_time(log.when(now + 0.3))} - INFO - checkpoint - saving step {step} to /ckpt/gpt2m/step_{step:06d}.pt")
            say(0, now + 4.3, f"{py_time(log.when(now + 4.3))} - INFO - checkpoint - saved /ckpt/gpt2m/step_{step:06d}.pt (1.42 GB) in 4.0 s")
    if not finish:
        return log.render()
    end = t + steps * per_step + 5
    say(0, end, f"{py_time(log.when(end))} - INFO - train - Training completed: {steps} steps in {clock(steps * per_step)}, final loss {loss:.4f}, 0 errors")
    for r in range(nranks):
        node, local = divmod(r, local_n)
        say(r, end + 1 + r * 0.003, nccl_destroy(hosts[node], pids[node][local], local, r, nranks))
    # torch 2.4+ prints this on rank 0 of many healthy runs that skip destroy_process_group().
    say(0, end + 2, f"{c10d_head('W', log.when(end + 2), 'ProcessGroupNCCL.cpp:1168')} Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())")
    launcher(end + 3, "I", "torch/distributed/elastic/agent/server/api.py:879", "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.")
    launcher(end + 3, "I", "torch/distributed/elastic/agent/server/api.py:932", "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish")
    launcher(end + 3.1, "I", "torch/distributed/elastic/agent/server/api.py:946", "Done waiting for other agents. Elapsed: 0.0021514892578125 seconds")
    return log.render()


LOGS: dict[str, Callable[[random.Random], str]] = {
    "hf-trainer-torchrun.log": hf_trainer,
    "lightning-ddp-srun.log": lightning,
    "megatron-gpt-mpirun.log": megatron,
    "deepspeed-zero2-pdsh.log": deepspeed,
    "torchrun-ddp.log": torchrun_ddp,
}


def render(name: str) -> str:
    """The text of one healthy log; each log has its own fixed seed."""
    return LOGS[name](random.Random(20240514 + sorted(LOGS).index(name)))


def main() -> None:
    """Regenerate every healthy log in this folder."""
    for name in sorted(LOGS):
        text = render(name)
        (HERE / name).write_text(text, encoding="utf-8", newline="")
        print(f"{name}: {text.count(chr(10))} lines, {len(text.encode()):,} bytes")


if __name__ == "__main__":
    main()
