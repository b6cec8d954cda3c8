"""Reads acc's tracker files back with independent readers, for runtime/test/tracking.

  read_back.py events FILE   TensorBoard's own reader (EventFileLoader, as the TensorBoard
                             server loads runs): one line per summary value
  read_back.py jsonl FILE    strict JSON (NaN/Infinity rejected): each object, keys sorted,
                             wall_time checked then dropped
  read_back.py csv FILE      Python's csv module: the header, then each row as name=value
"""
import csv
import json
import struct
import sys


def events(path):
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.plugins.hparams import plugin_data_pb2

    for event in event_file_loader.LegacyEventFileLoader(path).Load():
        if event.HasField("file_version"):
            print(f"file_version {event.file_version}")
        for value in event.summary.value:
            plugin = value.metadata.plugin_data.plugin_name
            if value.HasField("simple_value"):
                bits = struct.unpack("<I", struct.pack("<f", value.simple_value))[0]
                print(f"scalar {value.tag} step={event.step} bits={bits:08x}")
            elif plugin == "text":
                text = value.tensor.string_val[0].decode()
                print(f"text {value.tag} step={event.step} {json.dumps(text)}")
            elif plugin == "hparams":
                data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                for name, hp in sorted(data.session_start_info.hparams.items()):
                    kind = hp.WhichOneof("kind")
                    print(f"hparam {name} {kind} {json.dumps(getattr(hp, kind))}")


def reject(constant):
    raise ValueError(f"not strict JSON: {constant}")


def jsonl(path):
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            obj = json.loads(line, parse_constant=reject)
            assert isinstance(obj.pop("wall_time"), float)
            print(json.dumps(obj, sort_keys=True))


def csv_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        print("header " + ",".join(reader.fieldnames))
        for row in reader:
            float(row.pop("wall_time"))
            print(" ".join(f"{k}={v}" for k, v in row.items() if v is not None and v != ""))


if __name__ == "__main__":
    {"events": events, "jsonl": jsonl, "csv": csv_rows}[sys.argv[1]](sys.argv[2])
