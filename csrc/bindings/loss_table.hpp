// The loss table of csrc/losses/losses.hpp as Python sees it (exported as loss_table() by
// _glm, _multinomial and _clip), and the code check every binding that takes a loss code uses.
// Generated from DPF_LOSS_TABLE: a loss added there appears here with no other edit.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "bindings/common.hpp"
#include "losses/losses.hpp"

namespace dpf_bind {

// {name: {"code", "outputs" ("one" | "classes"), "labels" ("pm1" | "real" | "classes"),
//         "lipschitz", "lipschitz_per_delta", "smoothness", "rank_deficit", "convex_clip"}}
inline pybind11::dict loss_table() {
    namespace py = pybind11;
    static const char* kOutputs[] = {"one", "classes"};
    static const char* kLabels[] = {"pm1", "real", "classes"};
    py::dict t;
    for (const dpf::loss::Info& e : dpf::loss::kTable) {
        py::dict row;
        row["code"] = e.code;
        row["outputs"] = kOutputs[static_cast<int>(e.outputs)];
        row["labels"] = kLabels[static_cast<int>(e.labels)];
        row["lipschitz"] = e.lipschitz;
        row["lipschitz_per_delta"] = e.lipschitz_per_delta;
        row["smoothness"] = e.smoothness;
        row["rank_deficit"] = e.rank_deficit;
        row["convex_clip"] = e.convex_clip;
        t[e.name] = row;
    }
    return t;
}

// The table row of `code` when it is one of the `outputs` kind, else a ValueError.
inline const dpf::loss::Info& checked_loss(int code, dpf::loss::Outputs outputs, const char* what) {
    const dpf::loss::Info* e = dpf::loss::find(code);
    if (!e || e->outputs != outputs) throw pybind11::value_error(std::string("unknown ") + what + " loss code");
    return *e;
}

}  // namespace dpf_bind
