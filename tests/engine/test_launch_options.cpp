// accel-run's command line: defaults, both value spellings, options on either
// side of the recipe, recipe arguments after `--`, and errors that name the
// option or value at fault.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/launch/launch_options.h"

namespace {

using accel::LaunchOptions;
using accel::LaunchOptionsError;
using accel::parse_launch_options;
using Args = std::vector<std::string>;

constexpr int kCores = 8;

LaunchOptions parse(const Args& args) { return parse_launch_options(args, kCores); }

// The message of the error parsing `args` raises; fails the test if none.
std::string error_of(const Args& args) {
  try {
    parse(args);
  } catch (const LaunchOptionsError& error) {
    return error.what();
  }
  FAIL("no error for the command line");
  return {};
}

}  // namespace

TEST_CASE("a bare recipe gets the defaults", "[launch_options]") {
  LaunchOptions o = parse({"train.lua"});
  CHECK(o.recipe == "train.lua");
  CHECK(o.recipe_args.empty());
  CHECK(o.nproc == 1);
  CHECK(o.threads == kCores);
  CHECK(o.master_addr == "127.0.0.1");
  CHECK(o.master_port == 0);
  CHECK(o.backend == "gloo");
  CHECK(o.grace_period_s == 5);
  CHECK_FALSE(o.help);
}

TEST_CASE("options go before or after the recipe, with a space or '='", "[launch_options]") {
  LaunchOptions o = parse({"--nproc", "4", "train.lua", "--master-addr=10.0.0.2",
                           "--master-port", "29500", "--threads=3", "--grace-period", "0.5",
                           "--backend=gloo"});
  CHECK(o.recipe == "train.lua");
  CHECK(o.nproc == 4);
  CHECK(o.master_addr == "10.0.0.2");
  CHECK(o.master_port == 29500);
  CHECK(o.threads == 3);
  CHECK(o.grace_period_s == 0.5);
  CHECK(o.backend == "gloo");
}

TEST_CASE("the last of a repeated option wins", "[launch_options]") {
  CHECK(parse({"--nproc", "2", "train.lua", "--nproc=3"}).nproc == 3);
}

TEST_CASE("everything after -- belongs to the recipe", "[launch_options]") {
  LaunchOptions o = parse({"train.lua", "--nproc", "2", "--", "--lr", "0.1", "extra", "--"});
  CHECK(o.nproc == 2);
  CHECK(o.recipe_args == Args{"--lr", "0.1", "extra", "--"});
}

TEST_CASE("default threads split the cores between the ranks, at least one each",
          "[launch_options]") {
  CHECK(parse({"train.lua", "--nproc", "2"}).threads == 4);
  CHECK(parse({"train.lua", "--nproc", "3"}).threads == 2);
  CHECK(parse({"train.lua", "--nproc", "16"}).threads == 1);
  CHECK(parse({"train.lua", "--nproc", "16", "--threads", "2"}).threads == 2);
  CHECK(parse_launch_options({"train.lua"}).threads >= 1);  // the machine's own count
}

TEST_CASE("--help needs no recipe, and lists every option", "[launch_options]") {
  CHECK(parse({"-h"}).help);
  CHECK(parse({"train.lua", "--help"}).help);
  std::string usage = accel::usage_text();
  for (const char* option : {"--nproc N", "--threads N", "--master-addr HOST",
                             "--master-port PORT", "--backend NAME", "--grace-period SECONDS",
                             "-h, --help", "RECIPE.lua"}) {
    INFO(option);
    CHECK(usage.find(option) != std::string::npos);
  }
}

TEST_CASE("errors name the option or value at fault", "[launch_options]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of({"--bogus", "train.lua"}), Contains("unknown option '--bogus'"));
  CHECK_THAT(error_of({"train.lua", "--bogus=1"}), Contains("unknown option '--bogus'"));
  CHECK_THAT(error_of({"train.lua", "--nproc"}), Contains("--nproc needs a value (N)"));
  CHECK_THAT(error_of({"train.lua", "--master-addr", "--nproc", "2"}),
             Contains("--master-addr needs a value"));
  CHECK_THAT(error_of({"train.lua", "--nproc", "abc"}),
             Contains("--nproc expects an integer from 1 to 4096, got 'abc'"));
  CHECK_THAT(error_of({"train.lua", "--nproc", "-1"}), Contains("got '-1'"));
  CHECK_THAT(error_of({"train.lua", "--nproc=0"}), Contains("got '0'"));
  CHECK_THAT(error_of({"train.lua", "--nproc=2x"}), Contains("got '2x'"));
  CHECK_THAT(error_of({"train.lua", "--nproc="}), Contains("--nproc expects an integer"));
  CHECK_THAT(error_of({"train.lua", "--master-port", "70000"}),
             Contains("--master-port expects an integer from 0 to 65535, got '70000'"));
  CHECK_THAT(error_of({"train.lua", "--grace-period", "soon"}),
             Contains("--grace-period expects a number of seconds"));
  CHECK_THAT(error_of({"train.lua", "--grace-period=nan"}), Contains("got 'nan'"));
  CHECK_THAT(error_of({"train.lua", "--backend", "nccl"}),
             Contains("unsupported --backend 'nccl' (supported: gloo)"));
  CHECK_THAT(error_of({"train.lua", "--help=yes"}), Contains("--help takes no value"));
  CHECK_THAT(error_of({"--nproc", "2"}), Contains("no recipe given"));
  CHECK_THAT(error_of({}), Contains("no recipe given"));
  CHECK_THAT(error_of({"--", "train.lua"}), Contains("no recipe given"));
}

TEST_CASE("a stray argument after the recipe points at --", "[launch_options]") {
  using Catch::Matchers::Contains;
  std::string message = error_of({"train.lua", "--nproc", "2", "epochs=3"});
  CHECK_THAT(message, Contains("unexpected argument 'epochs=3' after the recipe 'train.lua'"));
  CHECK_THAT(message, Contains("accel-run train.lua -- epochs=3"));
}
