#include <mutex>
#include <thread>
#include <utility>

#include "engine/comm/communicator.h"

namespace accel {
namespace {

struct Registration {
  std::mutex mutex;
  CallSiteProvider provider;
  std::thread::id thread;
  bool pinned = false;
  std::string pinned_site;
};

Registration& registration() {
  static Registration instance;
  return instance;
}

}  // namespace

void set_call_site_provider(CallSiteProvider provider) {
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.provider = std::move(provider);
  r.thread = std::this_thread::get_id();
}

std::string current_call_site() {
  Registration& r = registration();
  CallSiteProvider provider;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.pinned) return r.pinned_site;
    if (!r.provider || r.thread != std::this_thread::get_id()) return "";
    provider = r.provider;
  }
  return provider();
}

PinnedCallSite::PinnedCallSite(std::string site) {
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  previous_ = std::exchange(r.pinned_site, std::move(site));
  was_pinned_ = std::exchange(r.pinned, true);
}

PinnedCallSite::~PinnedCallSite() {
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.pinned_site = std::move(previous_);
  r.pinned = was_pinned_;
}

}  // namespace accel
