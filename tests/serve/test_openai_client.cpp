// `qforge serve` as users run it, driven by the official openai npm client
// (tests/oracles/openai/client.mjs): the models list, completions and chat, streamed and
// not, several clients at once, and the refusals as the client raises them. Every text
// at temperature 0 must equal what `qforge run` prints for the same prompt and options.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_path.h"

extern char** environ;

namespace qforge {
namespace {

using nlohmann::json;

const std::filesystem::path kClientDir =
    std::filesystem::path(QFORGE_SOURCE_ROOT) / "tests" / "oracles" / "openai";

std::string read_file(const std::string& path) {
  std::ostringstream out;
  out << std::ifstream(path).rdbuf();
  return out.str();
}

// `qforge serve ARGS --port 0` as a child process; its log goes to a file, from which the
// port it bound is read. stop() sends SIGTERM and returns the exit status.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args)
      : log_(test::temp_path("npm", "serve.log")) {
    std::vector<std::string> argv = {QFORGE_BINARY, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--port", "0"});
    std::vector<char*> c_argv;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int spawned = posix_spawn(&pid_, c_argv[0], &actions, nullptr, c_argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) pid_ = -1;
  }
  ~ServeProcess() {
    if (pid_ > 0) stop();
    std::filesystem::remove(log_);
  }
  // PORT in "... on http://HOST:PORT, ...", or 0 while there is none.
  static int bound_port(const std::string& text) {
    const std::size_t on = text.find("on http://");
    if (on == std::string::npos) return 0;
    const std::size_t colon = text.find(':', on + 10);
    const std::size_t comma = colon == std::string::npos ? colon : text.find(',', colon);
    if (comma == std::string::npos || comma == colon + 1) return 0;
    const std::string digits = text.substr(colon + 1, comma - colon - 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return 0;
    return std::stoi(digits);
  }
  // The port from "... on http://127.0.0.1:PORT, ...", or 0 when it exits or 120 s pass.
  int wait_for_port() {
    for (int i = 0; i < 1200 && pid_ > 0; ++i) {
      if (const int port = bound_port(read_file(log_)); port > 0) return port;
      if (int status = 0; waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const { return read_file(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What `qforge run` prints on stdout (the prompt echoed, the text, a newline) at
// temperature 0, with the prompt and the final newline taken off.
std::string run_text(const std::string& model, const std::string& prompt, int tokens, bool chat) {
  const std::string command = std::string("(") + QFORGE_BINARY + " run -m " + quoted(model) +
                              " --quant int8 -t 2 --temp 0 -n " + std::to_string(tokens) +
                              (chat ? " --chat" : "") + " -p " + quoted(prompt) + " 2>/dev/null)";
  const test::CommandResult r = test::run_command(command);
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
  std::string text = r.output;
  if (!chat && text.rfind(prompt, 0) == 0) text.erase(0, prompt.size());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST(OpenAiNpmClient, AnswersAsQforgeRunDoes) {
  ASSERT_TRUE(std::filesystem::exists(kClientDir / "node_modules" / "openai"))
      << "the openai npm package is not installed in " << kClientDir
      << " (run tools/bootstrap, which runs npm ci there)";
  const std::string model = test::model_path("stories260K/stories260K.gguf");
  const json scenario = {
      {"completions",
       {{{"prompt", "Once upon a time"}, {"max_tokens", 40}},
        {{"prompt", "Lily and Ben went to the park"}, {"max_tokens", 12}}}},
      {"chat", {{{"content", "Tell me a story about a cat."}, {"max_tokens", 30}}}},
      {"concurrent",
       {{{"prompt", "Tom had a red ball"}, {"max_tokens", 50}},
        {{"prompt", "The sun"}, {"max_tokens", 8}},
        {{"prompt", "One day, a little bird"}, {"max_tokens", 33}},
        {{"prompt", "Sam"}, {"max_tokens", 20}},
        {{"prompt", "Once upon a time, there was a big dog"}, {"max_tokens", 64}},
        {{"prompt", "Mia liked to"}, {"max_tokens", 5}},
        {{"prompt", "It was a rainy day"}, {"max_tokens", 27}},
        {{"prompt", "Max"}, {"max_tokens", 45}}}}};
  const std::string scenario_path = test::temp_path("npm", "scenario.json");
  std::ofstream(scenario_path) << scenario.dump();

  ServeProcess server({"-m", model, "--quant", "int8", "-t", "2", "--parallel", "4", "-c", "512",
                       "--api-key", "sk-qforge", "--model-id", "stories"});
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  const test::CommandResult client =
      test::run_command("node " + quoted((kClientDir / "client.mjs").string()) +
                        " http://127.0.0.1:" + std::to_string(port) + "/v1 sk-qforge stories " +
                        quoted(scenario_path));
  std::filesystem::remove(scenario_path);
  ASSERT_EQ(client.exit_code, 0) << client.output << "\n" << server.log();
  const json got = json::parse(client.output);
  EXPECT_EQ(server.stop(), 0) << server.log();  // SIGTERM: a clean exit

  EXPECT_EQ(got["models"], json::array({"stories"}));
  for (std::size_t i = 0; i < scenario["completions"].size(); ++i) {
    const json& c = scenario["completions"][i];
    const json& r = got["completions"][i];
    const std::string expected = run_text(model, c["prompt"], c["max_tokens"], false);
    EXPECT_GT(expected.size(), 10u) << "qforge run printed too little to compare";
    EXPECT_EQ(r["text"], expected) << c;
    EXPECT_EQ(r["streamed"], expected) << c;
    EXPECT_EQ(r["object"], "text_completion");
    // The length, unless the model ended the text first (then fewer, and "stop").
    const int completion = r["usage"]["completion_tokens"];
    EXPECT_LE(completion, c["max_tokens"].get<int>()) << r;
    EXPECT_EQ(r["finish_reason"], completion == c["max_tokens"].get<int>() ? "length" : "stop");
    EXPECT_EQ(r["usage"]["total_tokens"].get<int>(),
              r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
    EXPECT_EQ(r["stream_usage"], r["usage"]);
  }
  const json& chat = got["chat"][0];
  const std::string reply = run_text(model, "Tell me a story about a cat.", 30, true);
  EXPECT_EQ(chat["content"], reply);
  EXPECT_EQ(chat["streamed"], reply);
  EXPECT_EQ(chat["role"], "assistant");
  EXPECT_EQ(chat["stream_role"], "assistant");
  EXPECT_EQ(chat["object"], "chat.completion");
  for (std::size_t i = 0; i < scenario["concurrent"].size(); ++i) {
    const json& c = scenario["concurrent"][i];
    EXPECT_EQ(got["concurrent"][i], run_text(model, c["prompt"], c["max_tokens"], false)) << c;
  }
  const json& errors = got["errors"];
  EXPECT_EQ(errors["wrong_key"]["status"], 401) << errors;
  EXPECT_EQ(errors["wrong_key"]["name"], "AuthenticationError") << errors;
  EXPECT_EQ(errors["unknown_model"]["status"], 404) << errors;
  EXPECT_EQ(errors["unknown_model"]["code"], "model_not_found") << errors;
  EXPECT_EQ(errors["too_long"]["status"], 400) << errors;
  EXPECT_EQ(errors["too_long"]["code"], "context_length_exceeded") << errors;
  EXPECT_EQ(errors["bad_field"]["status"], 400) << errors;
  EXPECT_EQ(errors["bad_field"]["name"], "BadRequestError") << errors;
}

}  // namespace
}  // namespace qforge
