// Which listener serves what (issue 13): the public listener refuses the admin surface however a
// client spells it; the admin listener serves its own paths only.
#include "gateway/admin_surface.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

TEST(AdminSurface, ThePublicListenerRefusesEverySpellingOfTheAdminSurface) {
  for (const char* path :
       {"/admin", "/admin/", "/admin/v1/accounts", "/metrics", "/metrics/", "/console",
        "/console/index.html", "//admin/v1/alerts", "/./admin/v1/alerts", "/x/../admin/v1/alerts",
        "/x/y/../../metrics", "/%61dmin/v1/alerts", "/%2561dmin/v1/alerts", "/ADMIN/v1/alerts",
        "/Metrics", "/admin%2fv1/alerts", "/admin;x/v1", "/metrics.txt", "/\\admin/v1/alerts",
        "/%2e%2e/admin", "/../../admin", "/%2fadmin", "/admin%00"}) {
    EXPECT_TRUE(IsAdminSurfacePath(path)) << path;
  }
}

TEST(AdminSurface, OrdinaryPathsStayPaid) {
  for (const char* path : {"/", "/work", "/administrators", "/metrics-api/x", "/consoles",
                           "/v1/admin", "/weather/admin", "/a/metrics", "/admin_panel", "/%zz",
                           "/%", "/x/..", ""}) {
    EXPECT_FALSE(IsAdminSurfacePath(path)) << path;
  }
}

TEST(AdminSurface, TheAdminListenerServesItsOwnPathsOnly) {
  for (const char* path : {"/healthz", "/metrics", "/admin/v1/accounts", "/console", "/console/",
                           "/inspector", "/inspector/", "/inspector/timeline.js", "/v1/sim"}) {
    EXPECT_TRUE(IsAdminListenerPath(path)) << path;
  }
  for (const char* path : {"/", "/work", "/v1/account", "/v1/operations/op_1", "/devnet/rpc",
                           "/v1/sim/x", "/admin", "//admin/v1/accounts", "/metrics/"}) {
    EXPECT_FALSE(IsAdminListenerPath(path)) << path;
  }
}

}  // namespace
}  // namespace agentpay
