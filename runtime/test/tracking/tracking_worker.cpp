// One rank of tracking_ranks_test: an Accelerator with every tracker and a progress bar, as a
// training loop uses them. `acc_tracking_worker DIR`: rank k logs under DIR/rank<k>, so that
// the parent can tell which ranks created files.
#include <cstdlib>
#include <string>

#include <acc/accelerator.h>
#include <acc/project_configuration.h>

int main(int argc, char** argv) {
  const char* rank = std::getenv("RANK");
  const std::string dir = std::string(argv[1]) + "/rank" + (rank != nullptr ? rank : "0");
  acc::Accelerator accelerator(acc::AcceleratorOptions().log_with("all").project_config(
      acc::ProjectConfiguration().project_dir(dir)));
  accelerator.init_trackers("proj", {{"lr", 0.1}, {"world", accelerator.num_processes()}});
  auto bar = accelerator.progress_bar(
      acc::ProgressBarOptions().total(5).description("train").stream(stdout).plain_secs(0));
  for (int64_t step = 0; step < 5; ++step) {
    const double loss = 1.0 / static_cast<double>(step + 1);
    accelerator.log({{"loss", loss}}, step);
    bar.set_postfix({{"loss", loss}});
    bar.update();
  }
  bar.close();
  accelerator.get_tracker("tensorboard").log({{"direct", 1.0}}, 5);
  accelerator.end_training();
  std::printf("rank %s done\n", rank != nullptr ? rank : "0");
  return 0;
}
