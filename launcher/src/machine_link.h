#pragma once
// The launchers of a job that spans machines keep each other alive. Machine 0's acc-launch listens on the
// agent port (main_process_port + 1); every other machine's acc-launch connects to it. Both sides send a
// heartbeat every timeout/5 seconds; a machine whose launcher closed the connection without saying
// goodbye, or that was not heard for `timeout_s` (killed, link down, frozen), is lost, and the
// supervisor stops this machine's ranks instead of leaving them blocked in a collective for the
// collective timeout (30 minutes).
//
// The attempt: machine 0's heartbeat carries its restart count, and the other machines start each
// attempt with that number, so that a machine restarted from outside rendezvouses in the same attempt
// (TORCHELASTIC_RESTART_COUNT) as the launchers that kept running.
//
// Wire format, one line per message: "H <machine rank>" (hello), "B <attempt>" (heartbeat; from a
// machine other than 0 the attempt is -1), "F <attempt>" (a rank of this machine failed in that
// attempt), "Q" (goodbye: this machine's ranks ended).
#include <poll.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch_plan.h"

namespace acc::launcher {

class MachineLink {
 public:
  using Clock = std::chrono::steady_clock;

  // Machine 0 binds the agent port on every interface and throws UsageError when it cannot (naming the
  // port and the fix); the others connect in the background, retrying until they reach it.
  MachineLink(const LaunchPlan& plan, double timeout_s);
  ~MachineLink();
  MachineLink(const MachineLink&) = delete;
  MachineLink& operator=(const MachineLink&) = delete;

  static int agent_port(const LaunchPlan& plan) { return plan.master_port + 1; }

  // The descriptors to poll; after poll, service() reads what arrived (pass the poll results back).
  void add_poll_fds(std::vector<pollfd>& fds) const;
  // Accepts, reads, connects, sends heartbeats that are due, and checks every peer's deadline.
  void service(const std::vector<pollfd>& fds, Clock::time_point now);
  // Seconds until service() has something to do without input.
  double seconds_to_next_duty(Clock::time_point now) const;

  // The first machine found lost since the last forget_losses(): "machine 1 (10.0.0.2) has not answered
  // for 5 s" or "machine 0's acc-launch (10.0.0.1) closed the connection without ending its ranks".
  const std::optional<std::string>& lost() const { return lost_; }
  // Before a restart: lost machines may come back (a new launcher connects again).
  void forget_losses();

  // Machine 0's restart count as last heard (machine 0: its own); nullopt until heard.
  std::optional<int> leader_attempt() const { return leader_attempt_; }
  void set_attempt(int attempt) {
    attempt_ = attempt;
    if (leader_) leader_attempt_ = attempt;
  }
  // Connections to machine 0 on which it has spoken so far (a new one may bring a restarted machine 0's
  // attempt).
  int connections() const { return connections_; }

  // This machine's ranks ended: tell the others, so that its leaving is not a loss. Machine 0 stops
  // listening first.
  void say_goodbye();
  // A rank of this machine failed in the current attempt: the other machines stop theirs too, rather than
  // finding out in a collective (a rank that died inside connectFullMesh, say, leaves its peers waiting
  // for the collective timeout).
  void announce_failure();

 private:
  struct Peer {
    int fd = -1;
    int machine = -1;  // from its hello (machine 0: its first heartbeat); -1 until then
    std::string address;
    std::string pending;  // a partial line
    Clock::time_point last_heard;
    bool said_goodbye = false;
  };

  void close_listener();
  void accept_peer(Clock::time_point now);
  void start_connect(Clock::time_point now);
  void finish_connect(Clock::time_point now);
  void read_peer(Peer& peer, Clock::time_point now);
  void handle_line(Peer& peer, const std::string& line);
  void send_to(Peer& peer, const std::string& line);
  void drop(Peer& peer, const std::string& why);
  std::string name(const Peer& peer) const;

  bool leader_;
  int machine_rank_;
  std::string leader_host_;
  int port_;
  double timeout_s_;
  double interval_s_;
  int attempt_ = 0;
  int listen_fd_ = -1;
  int connecting_fd_ = -1;  // a client's connect in progress
  Clock::time_point next_connect_;
  Clock::time_point next_beat_;
  std::vector<Peer> peers_;
  std::optional<std::string> lost_;
  std::optional<int> leader_attempt_;
  bool goodbye_ = false;
  int connections_ = 0;
};

}  // namespace acc::launcher
