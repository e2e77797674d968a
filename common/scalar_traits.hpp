// ScalarTraits<T>: machine epsilon, the LAPACK letter and names for float and double.
#pragma once

#include <limits>

namespace starfact {

template <class T>
struct ScalarTraits;

template <>
struct ScalarTraits<float> {
    static constexpr char letter = 's';
    static constexpr const char* name = "float";
    /// LAPACK's eps: the relative machine precision (half an ulp of 1), as slamch('E').
    static constexpr float eps = std::numeric_limits<float>::epsilon() / 2;
};

template <>
struct ScalarTraits<double> {
    static constexpr char letter = 'd';
    static constexpr const char* name = "double";
    static constexpr double eps = std::numeric_limits<double>::epsilon() / 2;
};

}  // namespace starfact
