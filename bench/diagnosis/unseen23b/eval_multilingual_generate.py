import datetime
import json
import os

import torch
import torch.distributed as dist

MAX_BYTES = 48
OUT = "predictions.jsonl"

PROMPTS = [
    "translate: the cat sleeps on the warm mat",
    "translate: a quiet morning by the river",
    "translate: the train leaves at seven",
    "translate: bring an umbrella tomorrow",
    "translate: the market opens early today",
    "translate: we walked along the old harbour",
    "traduire: le café près de la gare ferme à midi pendant les fêtes de l'été",
    "traduire: l'été dernier à Genève il faisait très chaud",
    "übersetzen: die Brücke über den Fluss ist wegen Bauarbeiten gesperrt",
    "übersetzen: wir fahren nächste Woche mit dem Zug nach München",
    "traducir: la canción más famosa del año pasado sonó en la radio",
    "traducir: el niño pequeño juega en el jardín con su perro",
]


def fake_generate(prompt):
    task, _, text = prompt.partition(": ")
    words = text.split()
    return {"task": task, "output": " ".join(reversed(words)), "n_words": len(words)}


def encode_fixed(texts):
    buf = torch.zeros(len(texts), MAX_BYTES + 1, dtype=torch.uint8)
    for i, t in enumerate(texts):
        data = t.encode("utf-8")[:MAX_BYTES]
        buf[i, 0] = len(data)
        buf[i, 1:1 + len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    return buf


def decode_fixed(buf):
    out = []
    for row in buf:
        n = int(row[0])
        out.append(bytes(row[1:1 + n].tolist()).decode("utf-8"))
    return out


def gather_texts(texts, world):
    if world == 1:
        return list(texts)
    local = encode_fixed(texts)
    parts = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(parts, local)
    merged = []
    for part in parts:
        merged.extend(decode_fixed(part))
    return merged


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    per_rank = len(PROMPTS) // world
    shard = PROMPTS[rank * per_rank:(rank + 1) * per_rank]
    results = [fake_generate(p) for p in shard]
    outputs = [r["output"] for r in results]
    words = torch.tensor([sum(r["n_words"] for r in results)], dtype=torch.long)
    dist.all_reduce(words)

    all_outputs = gather_texts(outputs, world)
    if rank == 0:
        with open(OUT, "w", encoding="utf-8") as f:
            for prompt, out in zip(PROMPTS, all_outputs):
                f.write(json.dumps({"prompt": prompt, "prediction": out}, ensure_ascii=False) + "\n")
        print(f"wrote {len(all_outputs)} predictions ({words.item()} words) to {OUT}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
