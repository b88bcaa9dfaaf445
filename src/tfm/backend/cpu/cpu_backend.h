#pragma once

#include "tfm/backend/backend.h"

namespace tfm {
Backend& cpu_backend();
}
