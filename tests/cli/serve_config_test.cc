// `agentpay serve`'s configuration: a misspelt or misplaced setting is refused with the key named
// and the closest valid one suggested, never silently ignored; paths are checked at start.
#include "cli/serve_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/closest_name.h"

namespace agentpay {
namespace {

namespace fs = std::filesystem;

class ServeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("agentpay_serve_config_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "admin-token") << "secret-token\n";
    fs::permissions(dir_ / "admin-token", fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::replace);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  // Parses `args` as `agentpay serve` would and resolves them.
  Result<GatewayConfig> Resolve(std::vector<std::string> args) {
    options_ = ServeOptions{};
    CLI::App app;
    AddServeFlags(app, options_);
    std::vector<const char*> argv = {"serve"};
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return ResolveServeConfig(app, options_);
  }

  Result<GatewayConfig> ResolveFile(const std::string& toml) {
    return Resolve({"--config", Write("agentpay.toml", toml)});
  }

  fs::path dir_;
  ServeOptions options_;
};

TEST(ClosestNameTest, SuggestsTheNearestValidName) {
  const std::vector<std::string> keys = {"listen", "db", "admin_token_file", "hold_ttl_ms"};
  EXPECT_EQ(ClosestName("admin-token-file", keys), "admin_token_file");
  EXPECT_EQ(ClosestName("listn", keys), "listen");
  EXPECT_EQ(ClosestName("hold_ttl", keys), "hold_ttl_ms");
  EXPECT_EQ(ClosestName("completely_different", keys), "");
  EXPECT_EQ(ClosestName("require_idempotency", {"prefix", "require_idempotency_key", "price"}),
            "require_idempotency_key");
}

TEST(ClosestNameTest, ListsTheValidNamesWhenNothingIsClose) {
  EXPECT_EQ(UnknownNameMessage("field", "zzzzzzzz", {"automine", "mine"}),
            "unknown field 'zzzzzzzz'; valid fields: automine, mine");
  EXPECT_EQ(UnknownNameMessage("field", "automin", {"automine", "mine"}),
            "unknown field 'automin'; did you mean 'automine'?");
}

TEST_F(ServeConfigTest, DashedKeyIsRefusedWithTheUnderscoreSpelling) {
  auto config = ResolveFile("admin-token-file = \"" + (dir_ / "admin-token").string() +
                            "\"\nupstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), "invalid_config");
  const std::string& message = config.status().message();
  EXPECT_NE(message.find("agentpay.toml:1: unknown key 'admin-token-file'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean 'admin_token_file'?"), std::string::npos) << message;
}

TEST_F(ServeConfigTest, UnknownRouteFieldIsRefusedWithTheClosestField) {
  auto config = ResolveFile(
      "[[route]]\nprefix = \"/weather\"\nupstream = \"http://127.0.0.1:9001\"\nprice = "
      "\"2500\"\nrequire_idempotency = true\n");
  ASSERT_FALSE(config.ok());
  const std::string& message = config.status().message();
  EXPECT_NE(message.find("agentpay.toml:5: unknown [[route]] field 'require_idempotency'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean 'require_idempotency_key'?"), std::string::npos) << message;
}

TEST_F(ServeConfigTest, UnknownTopLevelKeyIsRefused) {
  auto config = ResolveFile("listn = \"127.0.0.1:1\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("unknown key 'listn'; did you mean 'listen'?"),
            std::string::npos)
      << config.status().message();
}

TEST_F(ServeConfigTest, WrongTypesAreRefusedNotDefaulted) {
  auto flag = ResolveFile("hold_ttl_ms = \"60000\"\n");
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("'hold_ttl_ms' must be an integer"), std::string::npos)
      << flag.status().message();
  auto route = ResolveFile(
      "[[route]]\nupstream = \"http://127.0.0.1:9001\"\nprice = 5\nrequire_idempotency_key = "
      "\"yes\"\n");
  ASSERT_FALSE(route.ok());
  EXPECT_NE(route.status().message().find("'require_idempotency_key' must be true or false"),
            std::string::npos)
      << route.status().message();
  auto single = ResolveFile("[route]\nupstream = \"http://127.0.0.1:9001\"\nprice = 5\n");
  ASSERT_FALSE(single.ok());
  EXPECT_NE(single.status().message().find("[[route]] tables"), std::string::npos)
      << single.status().message();
  auto missing = ResolveFile("[[route]]\nprice = 5\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'upstream' is required"), std::string::npos)
      << missing.status().message();
}

TEST_F(ServeConfigTest, SettingsThatWouldBeIgnoredAreRefused) {
  // An empty route list is no route at all (it used to reach the gateway and abort it).
  auto empty = ResolveFile("route = []\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no paid route"), std::string::npos)
      << empty.status().message();
  // A price beside [[route]] tables would be nobody's price.
  auto price =
      ResolveFile("price = \"5\"\n[[route]]\nupstream = \"http://127.0.0.1:9\"\nprice = 7\n");
  ASSERT_FALSE(price.ok());
  EXPECT_NE(price.status().message().find("not both"), std::string::npos);
  // A node's settings mean nothing to the built-in devnet, and the devnet's nothing to a node.
  auto pay_to = ResolveFile(
      "pay_to = \"0x1111111111111111111111111111111111111111\"\n"
      "upstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_FALSE(pay_to.ok());
  EXPECT_NE(pay_to.status().message().find("--pay-to applies only with --chain-rpc"),
            std::string::npos)
      << pay_to.status().message();
  auto chain_id = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--chain-id", "5"});
  ASSERT_FALSE(chain_id.ok());
  EXPECT_NE(chain_id.status().message().find("--chain-id applies only with --chain-rpc"),
            std::string::npos);
  auto mine_delay = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--chain-rpc",
                             "http://127.0.0.1:8545", "--devnet-mine-delay-ms", "10"});
  ASSERT_FALSE(mine_delay.ok());
  EXPECT_NE(mine_delay.status().message().find("--devnet-mine-delay-ms applies only to the "
                                               "built-in devnet"),
            std::string::npos)
      << mine_delay.status().message();
  // A directory is not a configuration file.
  auto directory = Resolve({"--config", dir_.string()});
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
}

TEST_F(ServeConfigTest, AValidFileResolvesEveryRouteField) {
  auto config = ResolveFile("listen = \"127.0.0.1:8405\"\nadmin_token_file = \"" +
                            (dir_ / "admin-token").string() +
                            "\"\nhold_ttl_ms = 60000\n[[route]]\nprefix = \"/weather/\"\n"
                            "upstream = \"http://127.0.0.1:9001\"\nprice = \"2500\"\n"
                            "timeout_ms = 5000\nrequire_idempotency_key = true\nsettle = "
                            "\"after\"\n[[route]]\nprefix = \"/news\"\nupstream = "
                            "\"http://127.0.0.1:9002\"\nprice = 7\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(options_.listen, "127.0.0.1:8405");
  EXPECT_EQ(config->admin_token, "secret-token");
  EXPECT_EQ(config->hold_ttl_ms, 60000);
  ASSERT_EQ(config->routes.size(), 2u);
  EXPECT_EQ(config->routes[0].prefix, "/weather");
  EXPECT_EQ(config->routes[0].price, 2500);
  EXPECT_EQ(config->routes[0].timeout_ms, 5000);
  EXPECT_TRUE(config->routes[0].require_idempotency_key);
  EXPECT_EQ(config->routes[0].settle, SettleTiming::kAfter);
  EXPECT_FALSE(config->routes[1].require_idempotency_key);
  EXPECT_EQ(config->routes[1].settle, SettleTiming::kBefore);
  EXPECT_EQ(config->routes[1].price, 7);
}

// Issue 14: several RPC endpoints (flags or a TOML array), fee caps, and the TLS pair.
TEST_F(ServeConfigTest, RealNetworkSettingsAreReadAndChecked) {
  const std::vector<std::string> chain = {"--chain-id",
                                          "84532",
                                          "--asset",
                                          "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
                                          "--asset-name",
                                          "USDC",
                                          "--asset-version",
                                          "2",
                                          "--pay-to",
                                          "0x1111111111111111111111111111111111111111",
                                          "--relayer-key-file",
                                          "relayer.key",
                                          "--upstream",
                                          "https://api.example.com",
                                          "--price",
                                          "1"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), chain.begin(), chain.end());
    return Resolve(more);
  };
  auto two = with({"--chain-rpc", "https://a.example", "--chain-rpc", "http://127.0.0.1:8545",
                   "--max-fee-per-gas", "2000000000", "--max-priority-fee-per-gas", "1000"});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(options_.chain_rpc,
            (std::vector<std::string>{"https://a.example", "http://127.0.0.1:8545"}));
  EXPECT_EQ(two->chain.max_fee_per_gas, chain::U256(2000000000));
  EXPECT_EQ(two->chain.max_priority_fee_per_gas, chain::U256(1000));
  EXPECT_TRUE(two->routes[0].upstream.tls);

  auto file = ResolveFile(
      "chain_rpc = [\"https://a.example\", \"https://b.example\"]\n"
      "chain_id = 84532\nasset = \"0x036CbD53842c5426634e7929541eC2318f3dCF7e\"\n"
      "asset_name = \"USDC\"\nasset_version = \"2\"\n"
      "pay_to = \"0x1111111111111111111111111111111111111111\"\n"
      "relayer_key_file = \"relayer.key\"\n"
      "upstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(options_.chain_rpc,
            (std::vector<std::string>{"https://a.example", "https://b.example"}));

  auto empty = ResolveFile("chain_rpc = []\nupstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("'chain_rpc' must be a string or a non-empty array"),
            std::string::npos)
      << empty.status().message();
  auto bad_url = with({"--chain-rpc", "https://a.example", "--chain-rpc", "ftp://b.example"});
  ASSERT_FALSE(bad_url.ok());
  EXPECT_NE(bad_url.status().message().find("--chain-rpc: expected an http:// or https:// URL"),
            std::string::npos)
      << bad_url.status().message();
  auto bad_fee = with({"--chain-rpc", "https://a.example", "--max-fee-per-gas", "2 gwei"});
  ASSERT_FALSE(bad_fee.ok());
  EXPECT_NE(bad_fee.status().message().find("--max-fee-per-gas must be a whole number of wei"),
            std::string::npos)
      << bad_fee.status().message();
  auto half_tls =
      Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--tls-cert", "cert.pem"});
  ASSERT_FALSE(half_tls.ok());
  EXPECT_NE(half_tls.status().message().find("--tls-cert and --tls-key go together"),
            std::string::npos)
      << half_tls.status().message();
}

TEST_F(ServeConfigTest, ChainThreadsAreAKnobWithARange) {
  auto plain = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->chain_threads, 8u);
  auto more =
      Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--chain-threads", "64"});
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(more->chain_threads, 64u);
  auto file = ResolveFile("chain_threads = 32\nupstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->chain_threads, 32u);
  for (const char* bad : {"0", "257"}) {
    auto refused =
        Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--chain-threads", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("--chain-threads"), std::string::npos)
        << refused.status().message();
  }
}

TEST_F(ServeConfigTest, SettlementBatchingIsOffByDefaultAndBounded) {
  auto plain = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->settle_batch_max, 1u);  // one transaction per payment
  EXPECT_EQ(plain->settle_batch_window_ms, 10);
  auto batched = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--settle-batch-max",
                          "64", "--settle-batch-window-ms", "0"});
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  EXPECT_EQ(batched->settle_batch_max, 64u);
  EXPECT_EQ(batched->settle_batch_window_ms, 0);
  auto file = ResolveFile(
      "settle_batch_max = 16\nsettle_batch_window_ms = 25\nupstream = \"http://127.0.0.1:9\"\n"
      "price = \"1\"\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->settle_batch_max, 16u);
  EXPECT_EQ(file->settle_batch_window_ms, 25);
  for (const auto& [flag, bad] :
       {std::pair{"--settle-batch-max", "0"}, std::pair{"--settle-batch-max", "65"},
        std::pair{"--settle-batch-window-ms", "-1"},
        std::pair{"--settle-batch-window-ms", "1001"}}) {
    auto refused = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", flag, bad});
    ASSERT_FALSE(refused.ok()) << flag << " " << bad;
    EXPECT_NE(refused.status().message().find(flag), std::string::npos)
        << refused.status().message();
  }
}

TEST_F(ServeConfigTest, TheFacilitatorNeedsItsSellersAndNeedsNoRoute) {
  for (const std::vector<std::string>& half :
       {std::vector<std::string>{"--facilitator-listen", "127.0.0.1:8407"},
        std::vector<std::string>{"--facilitator-sellers-file", "sellers"}}) {
    std::vector<std::string> args = {"--upstream", "http://127.0.0.1:9", "--price", "1"};
    args.insert(args.end(), half.begin(), half.end());
    auto refused = Resolve(args);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(
                  "--facilitator-listen and --facilitator-sellers-file go together"),
              std::string::npos)
        << refused.status().message();
  }
  auto alone =
      Resolve({"--facilitator-listen", "127.0.0.1:8407", "--facilitator-sellers-file", "sellers"});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_TRUE(alone->routes.empty());
  auto none = Resolve({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no paid route"), std::string::npos);
}

TEST_F(ServeConfigTest, AFlagWinsOverTheFile) {
  auto config = Resolve({"--config", Write("a.toml", "listen = \"127.0.0.1:1\"\n"), "--listen",
                         "127.0.0.1:2", "--upstream", "http://127.0.0.1:9", "--price", "1"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(options_.listen, "127.0.0.1:2");
}

TEST_F(ServeConfigTest, MissingFilesAreNamed) {
  auto config = Resolve({"--config", (dir_ / "nope.toml").string()});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--config " + (dir_ / "nope.toml").string() +
                                           ": cannot open it"),
            std::string::npos)
      << config.status().message();
  auto token = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--admin-token-file",
                        (dir_ / "no-token").string()});
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("--admin-token-file: cannot read " +
                                          (dir_ / "no-token").string()),
            std::string::npos)
      << token.status().message();
}

// Issue 13, as ssh does: a token or key file that group or others can read (or write) is refused,
// and the message names the file, its mode and the fix.
TEST_F(ServeConfigTest, ASecretFileOthersCanReadIsRefusedWithTheFix) {
  const std::string path = (dir_ / "admin-token").string();
  for (unsigned mode : {0644u, 0640u, 0604u, 0620u, 0660u, 0666u, 0610u}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto config = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1",
                           "--admin-token-file", path});
    ASSERT_FALSE(config.ok()) << std::oct << mode;
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    const std::string& message = config.status().message();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("mode ") + octal), std::string::npos) << message;
    EXPECT_NE(message.find("chmod 600 " + path), std::string::npos) << message;
  }
  for (unsigned mode : {0600u, 0400u}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto config = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1",
                           "--admin-token-file", path});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->admin_token, "secret-token");
  }
}

TEST_F(ServeConfigTest, SecretFilesAreWrittenPrivateAndNeverThroughALink) {
  const fs::path target = dir_ / "victim";
  std::ofstream(target) << "untouched\n";
  const fs::path link = dir_ / "demo-secret";
  fs::create_symlink(target, link);
  // Reading a file agentpay writes itself refuses a link there.
  auto read = ReadSecretFile(link.string(), SecretLinks::kRefuse);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("symbolic link"), std::string::npos);
  // Writing replaces the link with a private file; the link's target is left as it was.
  ASSERT_TRUE(WriteSecretFile(link.string(), "s3cret").ok());
  EXPECT_FALSE(fs::is_symlink(link));
  struct stat info {};
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(*ReadSecretFile(link.string(), SecretLinks::kRefuse), "s3cret");
  std::ifstream victim(target);
  std::string content;
  std::getline(victim, content);
  EXPECT_EQ(content, "untouched");
}

TEST_F(ServeConfigTest, TheDefaultStoreDirectoryIsCreatedPrivate) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  auto config = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  Status prepared = PrepareStoreDirectory(options_);
  fs::current_path(cwd);
  ASSERT_TRUE(prepared.ok()) << prepared.ToString();
  struct stat info {};
  ASSERT_EQ(::stat((dir_ / "agentpay-data").c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0700u);
}

TEST_F(ServeConfigTest, ANamedStoreDirectoryMustExist) {
  const std::string missing = (dir_ / "missing" / "agentpay.db").string();
  auto config =
      Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--db", "sqlite:" + missing});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  Status prepared = PrepareStoreDirectory(options_);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(
      prepared.message().find("the directory " + (dir_ / "missing").string() + " does not exist"),
      std::string::npos)
      << prepared.message();
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
  // Named in the file, it is the operator's too.
  auto from_file = ResolveFile("db = \"sqlite:" + missing +
                               "\"\nupstream = \"http://127.0.0.1:9\"\nprice = \"1\"\n");
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_FALSE(PrepareStoreDirectory(options_).ok());
  // A file of another name in the default directory: that directory is still serve's to make.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  auto in_default = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--db",
                             "sqlite:./agentpay-data/routes.db"});
  Status made = PrepareStoreDirectory(options_);
  fs::current_path(cwd);
  ASSERT_TRUE(in_default.ok());
  EXPECT_TRUE(made.ok()) << made.ToString();
  EXPECT_TRUE(fs::is_directory(dir_ / "agentpay-data"));
  // A file where the directory should be.
  Write("plain-file", "x");
  auto under_file = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--db",
                             "sqlite:" + (dir_ / "plain-file" / "a.db").string()});
  ASSERT_TRUE(under_file.ok());
  Status refused = PrepareStoreDirectory(options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("is not a directory"), std::string::npos) << refused.message();
}

// The fuzz target's entry (fuzz/serve_config_fuzzer.cc): the same resolution from the file's text,
// messages naming the file, and no file read (the admin token is left to ResolveServeConfig).
TEST_F(ServeConfigTest, TextResolvesLikeTheFileAndReadsNoFile) {
  const std::string text = "admin_token_file = \"" + (dir_ / "no-such-token").string() +
                           "\"\n[[route]]\nprefix = \"/a/\"\nupstream = \"http://127.0.0.1:9\"\n"
                           "price = 5\n";
  CLI::App app;
  ServeOptions options;
  AddServeFlags(app, options);
  const char* argv[] = {"serve"};
  app.parse(1, argv);
  options.config_file = "inline.toml";
  auto config = ResolveServeConfigText(app, options, text);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->admin_token.empty());
  ASSERT_EQ(config->routes.size(), 1u);
  EXPECT_EQ(config->routes[0].prefix, "/a");
  EXPECT_EQ(config->routes[0].price, 5);
  // From the file, the missing token file is an error: the file path reads it.
  auto from_file = ResolveFile(text);
  ASSERT_FALSE(from_file.ok());
  EXPECT_NE(from_file.status().message().find("--admin-token-file"), std::string::npos);

  ServeOptions again;
  CLI::App app2;
  AddServeFlags(app2, again);
  app2.parse(1, argv);
  again.config_file = "inline.toml";
  auto broken = ResolveServeConfigText(app2, again, "listen = [\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().error(), ErrorCode::kInvalidConfig);
  EXPECT_EQ(broken.status().message().rfind("inline.toml:", 0), 0u) << broken.status().message();
}

TEST_F(ServeConfigTest, RateLimitsFromFlagsAndFile) {
  auto defaults = Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1"});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->rate_limits.per_client, kDefaultRateLimit);
  EXPECT_EQ(defaults->rate_limits.per_payer, kDefaultRateLimit);
  // One flag for all three; a per-kind one wins for its kind; a flag wins over the file.
  auto set = Resolve({"--config",
                      Write("limits.toml", "rate_limit_per_payer = \"off\"\nrate_limit = \"7:9\"\n"),
                      "--upstream", "http://127.0.0.1:9", "--price", "1", "--rate-limit", "5",
                      "--rate-limit-per-account", "3:4"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->rate_limits.per_client, (RateLimit{5, 5}));
  EXPECT_EQ(set->rate_limits.per_account, (RateLimit{3, 4}));
  EXPECT_TRUE(set->rate_limits.per_payer.unlimited());
  for (const char* bad : {"x", "5:", ":5", "0:5", "5:0", "1.5", "99999999999", "5:5:5", "off:3"}) {
    auto refused =
        Resolve({"--upstream", "http://127.0.0.1:9", "--price", "1", "--rate-limit", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("--rate-limit"), std::string::npos);
  }
  auto bad_kind = Resolve(
      {"--upstream", "http://127.0.0.1:9", "--price", "1", "--rate-limit-per-payer", "fast"});
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.status().message().find("--rate-limit-per-payer"), std::string::npos);
}

TEST_F(ServeConfigTest, RoutePrefixMustBeNormalised) {
  for (const char* prefix : {"/a/../b", "/%7Eb", "//a", "/a/./b", "/a?b", "/a%2Fb"}) {
    auto config = ResolveFile(std::string("[[route]]\nprefix = \"") + prefix +
                              "\"\nupstream = \"http://127.0.0.1:9\"\nprice = 1\n");
    ASSERT_FALSE(config.ok()) << prefix;
    EXPECT_NE(config.status().message().find("not a normalised path"), std::string::npos)
        << config.status().message();
  }
  auto ok = ResolveFile("[[route]]\nprefix = \"/api/v1/\"\nupstream = \"http://127.0.0.1:9\"\nprice = 1\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->routes.front().prefix, "/api/v1");
}

// Issue 36: the 402 names its resources under --public-url, else under --listen's own URL (https
// with --tls-cert); a base URL that is not one is refused with the flag named.
TEST_F(ServeConfigTest, PublicUrlIsCheckedOrDerivedFromTheListener) {
  const std::vector<std::string> route = {"--upstream", "http://127.0.0.1:9", "--price", "1"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), route.begin(), route.end());
    return Resolve(more);
  };
  auto derived = with({"--listen", "127.0.0.1:9402"});
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ(derived->public_url, "http://127.0.0.1:9402");
  auto tls = with({"--listen", "[::1]:9402", "--tls-cert", "c.pem", "--tls-key", "k.pem"});
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->public_url, "https://[::1]:9402");
  auto given = with({"--public-url", "https://Pay.Example.com:443/base/", "--tls-cert", "c.pem",
                     "--tls-key", "k.pem"});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->public_url, "https://pay.example.com/base");
  auto file = ResolveFile(
      "public_url = \"http://pay.example.com:8080\"\nupstream = \"http://127.0.0.1:9\"\nprice = "
      "1\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->public_url, "http://pay.example.com:8080");
  for (const char* bad :
       {"pay.example.com", "https://pay.example.com/?x=1", "https://u@pay.example",
        "ftp://pay.example.com", "https://pay.example.com/a/../b", "https://"}) {
    auto refused = with({"--public-url", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), "invalid_config");
    EXPECT_TRUE(refused.status().message().starts_with("--public-url: "))
        << refused.status().message();
  }
}

// The admin listener's other origins: each one checked whole, at most kMaxAdminOrigins, and only
// where there is an admin listener (given with --admin-listen off, it would be silently ignored).
TEST_F(ServeConfigTest, AdminOriginsAreCheckedAndNeedTheAdminListener) {
  const std::vector<std::string> route = {"--upstream", "http://127.0.0.1:9", "--price", "1"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), route.begin(), route.end());
    return Resolve(more);
  };
  auto two = with(
      {"--admin-origin", "https://Console.Example.com/", "--admin-origin", "http://10.0.0.5:8404"});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  auto origins = AdminOriginsOf(options_);
  ASSERT_TRUE(origins.ok());
  ASSERT_EQ(origins->size(), 2u);
  EXPECT_EQ((*origins)[0].Serialize(), "https://console.example.com");
  EXPECT_EQ((*origins)[1].Serialize(), "http://10.0.0.5:8404");
  auto file = ResolveFile(
      "admin_origin = [\"https://a.example\", \"https://b.example\"]\nupstream = "
      "\"http://127.0.0.1:9\"\nprice = 1\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(AdminOriginsOf(options_)->size(), 2u);
  for (const char* bad : {"https://console.example.com/console", "console.example.com", "null",
                          "https://console.example.com?x", "http://console.example.com:0"}) {
    auto refused = with({"--admin-origin", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_TRUE(refused.status().message().starts_with("--admin-origin: "))
        << refused.status().message();
  }
  auto off = with({"--admin-listen", "off", "--admin-origin", "https://console.example.com"});
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("--admin-listen is off"), std::string::npos);
  std::vector<std::string> many;
  for (size_t i = 0; i <= kMaxAdminOrigins; ++i) {
    many.push_back("--admin-origin");
    many.push_back("https://c" + std::to_string(i) + ".example");
  }
  auto too_many = with(many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("at most 16"), std::string::npos);
}

// Issue 36 item 2: a prefix is the upstream's plain path, which every server reads alike but for
// case, and no two prefixes differ only in case; else requests could not be told apart.
TEST_F(ServeConfigTest, RoutePrefixesMustReadAlikeEverywhere) {
  for (const char* prefix : {"/a;b", "/pro.", "/a%20", "/caf%C3%A9", "/expens~1", "/a::$DATA",
                             "/a%2541", "/a/..%3B/b", "/a%EF%BC%8Fb"}) {
    auto config = ResolveFile(std::string("[[route]]\nprefix = \"") + prefix +
                              "\"\nupstream = \"http://127.0.0.1:9\"\nprice = 1\n");
    ASSERT_FALSE(config.ok()) << prefix;
    EXPECT_NE(config.status().message().find(prefix), std::string::npos)
        << config.status().message();
  }
  const std::string route = "\"\nupstream = \"http://127.0.0.1:9\"\nprice = 1\n";
  auto twins = ResolveFile("[[route]]\nprefix = \"/Pro" + route + "[[route]]\nprefix = \"/api" +
                           route + "[[route]]\nprefix = \"/pro" + route);
  ASSERT_FALSE(twins.ok());
  EXPECT_NE(twins.status().message().find("letter case"), std::string::npos)
      << twins.status().message();
  EXPECT_NE(twins.status().message().find("/Pro and /pro"), std::string::npos);
  auto ok = ResolveFile("[[route]]\nprefix = \"/API" + route + "[[route]]\nprefix = \"/api/V2" +
                        route + "[[route]]\nprefix = \"/v1/things:batch" + route);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->routes.size(), 3u);
}

}  // namespace
}  // namespace agentpay
