// The globals a template sees beside its variables: Jinja's range, dict,
// namespace, and transformers' raise_exception and strftime_now.
#pragma once
#include "engine/chat_template/value.h"

namespace accel::chat_template {

// `clock`: seconds since the epoch for strftime_now (the render's own
// time, passed in so a test can fix it).
Dict builtin_globals(int64_t clock);

}  // namespace accel::chat_template
