#include "questionnaire.h"

#include <functional>
#include <string>

#include <acc/environment.h>

#include "errors.h"
#include "fsdp_options.h"

namespace acc::launcher {
namespace {

class Asker {
 public:
  Asker(std::istream& in, std::ostream& out) : in_(in), out_(out) {}

  // Shows the question with its default, reads a line, and passes it (or the default for an empty line)
  // to `check`, which returns the value or throws UsageError; on error says why and asks again.
  template <typename T>
  T ask(const std::string& question, const std::string& default_answer, const std::function<T(const std::string&)>& check) {
    for (;;) {
      out_ << question << (default_answer.empty() ? "" : " [" + default_answer + "]") << ": " << std::flush;
      std::string line;
      if (!std::getline(in_, line))
        throw UsageError("the input ended before the last question; nothing was written (run acc-config again)");
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      while (!line.empty() && line.front() == ' ') line.erase(0, 1);
      if (line.empty()) line = default_answer;
      try {
        return check(line);
      } catch (const UsageError& e) {
        out_ << "  " << e.what() << "; please answer again\n";
      }
    }
  }

  std::string choice(const std::string& question, const std::vector<std::string>& choices, const std::string& default_answer) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    return ask<std::string>(question + " (" + list + ")", default_answer, [&](const std::string& v) {
      std::string upper = v;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const auto& c : choices) {
        std::string upper_choice = c;
        for (auto& ch : upper_choice) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (upper_choice == upper) return c;
      }
      return parse_choice(v, choices, "answer");
    });
  }

  int integer(const std::string& question, int default_answer, int min_value, int max_value) {
    return ask<int>(question, std::to_string(default_answer), [&](const std::string& v) {
      const int value = parse_int(v, "answer", min_value);
      if (value > max_value) throw UsageError("answer: " + v + " is too large; at most " + std::to_string(max_value));
      return value;
    });
  }

  bool yes_no(const std::string& question, bool default_answer) {
    return ask<bool>(question + " (yes/no)", default_answer ? "yes" : "no",
                     [](const std::string& v) { return parse_bool(v, "answer"); });
  }

  std::string text(const std::string& question, const std::string& default_answer) {
    return ask<std::string>(question, default_answer, [](const std::string& v) {
      if (v.empty()) throw UsageError("an answer is needed");
      return v;
    });
  }

 private:
  std::istream& in_;
  std::ostream& out_;
};

void ask_fsdp(Asker& a, LaunchSettings& s) {
  auto choice_of = [&](const std::string& key, const std::string& question, const std::string& default_answer) {
    const FsdpOption& option = *find_fsdp_option(key);
    s.fsdp[key] = a.choice(question, option.choices, default_answer);
  };
  choice_of("fsdp_sharding_strategy", "FSDP sharding strategy", "FULL_SHARD");
  s.fsdp["fsdp_offload_params"] = a.yes_no("Offload parameters and gradients to CPU?", false) ? "true" : "false";
  choice_of("fsdp_auto_wrap_policy", "How should modules become FSDP units?", "NO_WRAP");
  if (s.fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP")
    s.fsdp["fsdp_transformer_layer_cls_to_wrap"] = a.text("Module class names to wrap, comma-separated", "");
  if (s.fsdp["fsdp_auto_wrap_policy"] == "SIZE_BASED_WRAP")
    s.fsdp["fsdp_min_num_params"] =
        std::to_string(a.integer("Minimum number of parameters per unit", 100000000, 1, 2000000000));
  choice_of("fsdp_state_dict_type", "Checkpoint layout", "FULL_STATE_DICT");
  s.fsdp["fsdp_activation_checkpointing"] =
      a.yes_no("Recompute activations in backward (activation checkpointing)?", false) ? "true" : "false";
}

}  // namespace

LaunchSettings ask_launch_settings(std::istream& in, std::ostream& out, const MachineFacts& facts) {
  Asker a(in, out);
  LaunchSettings s;
  out << "Press Enter to take the default shown in [brackets].\n";
  s.num_machines = a.integer("How many machines will you use?", 1, 1, 100000);
  if (*s.num_machines > 1) {
    s.machine_rank = a.integer("What is the rank of this machine (0 for the main one)?", 0, 0, *s.num_machines - 1);
    s.main_process_ip = a.ask<std::string>("What is the IP address or host name of the main machine (rank 0)?", "",
                                           [](const std::string& v) { return parse_host(v, "answer"); });
    s.main_process_port = a.integer("Which port on the main machine?", env::kDefaultMainProcessPort, 1, 65535);
    s.rdzv_backend = "static";
    s.same_network = true;
  }
  const std::string type_default = facts.gpu_count > 1 || *s.num_machines > 1 ? (facts.gpu_count > 0 ? "MULTI_GPU" : "MULTI_CPU") : "NO";
  s.distributed_type = parse_distributed_type(
      a.choice("Which kind of distributed training?", {"NO", "MULTI_CPU", "MULTI_GPU", "FSDP"}, type_default), "answer");
  s.use_cpu = *s.distributed_type == DistributedType::kMultiCpu ||
              a.yes_no("Run on CPU only, even if there are GPUs?", facts.gpu_count == 0);
  const int per_machine = (!*s.use_cpu && facts.gpu_count > 0) ? facts.gpu_count : 1;
  const int total_default = *s.distributed_type == DistributedType::kNo ? 1 : per_machine * *s.num_machines;
  s.num_processes = a.integer("How many processes in total, over all machines?", total_default, 1, 1000000);
  if (!*s.use_cpu && *s.distributed_type != DistributedType::kNo)
    s.gpu_ids = a.ask<std::string>("Which GPUs of this machine (ids like 0,1, or all)?", "all",
                                   [](const std::string& v) { return parse_gpu_ids(v, "answer"); });
  if (*s.distributed_type == DistributedType::kFsdp) ask_fsdp(a, s);
  // fp8 is not offered: acc's runtime refuses it (an answer of fp8 is told why).
  s.mixed_precision = a.ask<std::string>("Mixed precision? (no, fp16, bf16)", "no", [](const std::string& v) {
    return parse_acc_mixed_precision(v, "answer");
  });
  s.debug = false;
  return s;
}

bool ask_yes_no(std::istream& in, std::ostream& out, const std::string& question, bool default_answer) {
  Asker a(in, out);
  return a.yes_no(question, default_answer);
}

LaunchSettings basic_settings(const MachineFacts& facts, const std::string& mixed_precision) {
  LaunchSettings s;
  s.mixed_precision = mixed_precision;
  s.debug = false;
  s.use_cpu = facts.gpu_count == 0;
  s.num_processes = facts.gpu_count > 0 ? facts.gpu_count : 1;
  s.distributed_type = facts.gpu_count > 1 ? DistributedType::kMultiGpu : DistributedType::kNo;
  return s;
}

}  // namespace acc::launcher
