#pragma once
/// \file fast.hpp
/// Umbrella header: everything a user of the planner needs. (plan_json.hpp and fabric_json.hpp,
/// which need nlohmann-json, are included separately.)

#include "balance.hpp"
#include "baselines.hpp"
#include "bvn.hpp"
#include "cost.hpp"
#include "error.hpp"
#include "fabric.hpp"
#include "fabric_bounds.hpp"
#include "layout.hpp"
#include "matching.hpp"
#include "matrix_io.hpp"
#include "plan.hpp"
#include "planner.hpp"
#include "rank_program.hpp"
#include "simulation.hpp"
#include "topology.hpp"
#include "traffic.hpp"
#include "traffic_summary.hpp"
#include "verify.hpp"
#include "workload.hpp"
