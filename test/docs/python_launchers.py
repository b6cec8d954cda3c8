"""Parses torchrun and `accelerate launch` command lines with those tools' own code, without launching.

Runs in acc's venv (ACC_PYTHON). Reads a JSON list of {"tool": "torchrun"|"accelerate", "argv": [...],
"inline": bool (an inline span: without a program only its flags are checked)}
on stdin and prints a JSON list of {"ok", "error", "processes", "command"}: what the tool would start
(torchrun's config_from_args; accelerate's _validate_launch_command and the launcher launch_command
would pick), and whether that can start a C++ program as the ranks of one job.
"""
import contextlib
import io
import json
import sys


def parse(parser, argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sys.stderr):
            return parser.parse_args(argv), None
    except SystemExit:
        return None, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "argparse error"


def torchrun(argv):
    from torch.distributed.run import config_from_args, get_args_parser
    parser = get_args_parser()
    parser.prog = "torchrun"
    args, error = parse(parser, argv)
    if error:
        return {"ok": False, "error": f"torchrun rejects it: {error}"}
    config, cmd, cmd_args = config_from_args(args)
    processes = int(config.nproc_per_node) * int(config.max_nodes)
    command = [cmd] + list(cmd_args)
    if cmd == sys.executable and not args.module and not args.training_script.endswith(".py"):
        return {"ok": False, "processes": processes, "command": command,
                "error": f"torchrun would start `python {args.training_script}` on each rank, which is not "
                         "a Python script: a C++ program needs --no-python (or --no_python)"}
    return {"ok": True, "processes": processes, "command": command}


def accelerate(argv):
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    parser = launch_command_parser()
    parser.prog = "accelerate launch"
    args, error = parse(parser, argv)
    if error:
        return {"ok": False, "error": f"accelerate launch rejects it: {error}"}
    try:
        with contextlib.redirect_stdout(sys.stderr):
            args, _, _ = _validate_launch_command(args)
    except ValueError as e:
        return {"ok": False, "error": f"accelerate launch rejects it: {e}"}
    # The launcher accelerate's launch_command picks (deepspeed/TPU/SageMaker do not start C++ ranks).
    distributed = (args.use_fsdp or args.multi_gpu or args.use_megatron_lm) and not args.cpu
    processes = int(args.num_processes or 1) if distributed else 1
    if args.use_deepspeed and not args.cpu:
        return {"ok": False, "error": "accelerate launch would use DeepSpeed's launcher, which acc does not run"}
    if not distributed and args.mpirun_hostfile is None and (args.num_processes or 1) > 1:
        return {"ok": False, "processes": 1,
                "error": f"accelerate launch would start one process, not {args.num_processes}: without "
                         "--multi_gpu (or --use_fsdp), or with --cpu, it uses its simple launcher, which runs "
                         "the program once; add --multi_gpu (it starts the processes through torchrun, on "
                         "CPU too) and drop --cpu"}
    if not args.no_python and not args.module and not args.training_script.endswith(".py"):
        return {"ok": False, "processes": processes,
                "error": f"accelerate launch would start `python {args.training_script}`, which is not a "
                         "Python script: a C++ program needs --no_python"}
    return {"ok": True, "processes": processes,
            "command": [args.training_script] + list(args.training_script_args)}


def main():
    results = []
    for item in json.load(sys.stdin):
        check = {"torchrun": torchrun, "accelerate": accelerate}[item["tool"]]
        try:
            result = check(item["argv"])
            if item.get("inline") and "required: training_script" in result.get("error", ""):
                # Prose that names the tool and some flags, no program: the flags alone are checked.
                result = check(item["argv"] + ["script.py"])
                result["flags_only"] = True
            results.append(result)
        except Exception as e:  # a crash inside the tool's own code is a finding too
            results.append({"ok": False, "error": f"{item['tool']} failed on it: {type(e).__name__}: {e}"})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
