#pragma once
/// \file export.hpp
/// FAST_EXEC_API marks what libfast_executor exports (everything else is hidden).

#if defined(_WIN32)
#define FAST_EXEC_API
#else
#define FAST_EXEC_API __attribute__((visibility("default")))
#endif
