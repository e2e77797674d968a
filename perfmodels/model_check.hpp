// StarPU performance-model files without StarPU: a strict reader of StarPU 1.3's text format,
// the pre-flight of the model directory that runs before starpu_init, the lock that serialises
// calibrations sharing a directory, and the convergence analysis behind `starfact calibrate`.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace starfact::models {

/// The format version StarPU 1.3 writes and accepts (the "45" of sampling/codelets/45).
constexpr int kFormatVersion = 45;

/// The directory of the codelet models: <perfmodel dir>/codelets/45.
std::string codelet_dir();
/// The host name in model file names: $STARPU_HOSTNAME, else gethostname().
std::string host_name();
/// <codelet_dir()>/<symbol>.<host_name()>, the file StarPU loads for `symbol`.
std::string model_path(const std::string& symbol);
/// STARPU_CALIBRATE as a number (0 when unset or not a number).
int calibrate_level();

/// One history entry: the samples StarPU kept for one footprint on one architecture.
struct Entry {
    std::uint32_t footprint = 0;
    unsigned long size = 0;  ///< the data size in bytes
    double flops = 0, mean_us = 0, deviation_us = 0, sum = 0, sum2 = 0;
    unsigned nsample = 0;
};

/// StarPU's regression of one architecture: the sample count and the range of sizes (the
/// model's size_base, else the data size in bytes) of the linear one's sums, and the non-linear
/// time_us = a * size^b + c that StarPU fits from the history entries (one point per footprint)
/// when it writes the file (NaN when it did not: a history-based model, or too few points).
struct Regression {
    unsigned nsample = 0;
    unsigned long minx = 0, maxx = 0;
    double a = std::numeric_limits<double>::quiet_NaN(), b = a, c = a;
    bool fitted() const;
    /// Whether StarPU 1.3 predicts with it (its nl_valid): fitted, at least `minimum` samples and
    /// sizes spread by more than 10%. It then predicts every size in [0.9 minx, 1.1 maxx] (even one
    /// with a history entry) and falls back to the footprint's history elsewhere.
    bool valid(unsigned minimum) const;
    double predict_us(double size) const;
    /// Whether `size` lies in [0.9 minx, 1.1 maxx], where StarPU predicts with the curve.
    bool predicts(double size) const;
};

/// The history of one architecture (StarPU's "combination", here one device) and implementation.
struct ArchModel {
    int type = -1;  ///< StarPU's worker type: 0 CPU, 1 CUDA
    int devid = 0, ncores = 0, ndevices = 1;
    int impl = 0;
    std::vector<Entry> entries;
    Regression regression;
    /// "cpu", "cuda<devid>" or "type<t>.<devid>" (several devices: joined with '+').
    std::string arch;
};

struct ModelFile {
    std::string path;
    std::string symbol;  ///< the file name without ".<host>"
    std::vector<ArchModel> archs;
};

/// A model file StarPU would refuse (it asserts and aborts on any of these): the message names
/// the file, the line and the fix.
class ModelFileError : public ArgumentError {
public:
    ModelFileError(const std::string& path, const std::string& reason) : ArgumentError(path, reason), reason_(reason) {}
    const std::string& reason() const noexcept { return reason_; }

private:
    std::string reason_;
};

/// Reads a model file the way StarPU 1.3 does (comment lines, version, combinations, devices,
/// implementations, regression lines, history entries), holding StarPU's read lock (fcntl) so
/// that a concurrent StarPU never shows it half written. Throws ModelFileError for an empty,
/// truncated, corrupt or foreign-version file, or values StarPU would assert on (negative means,
/// deviations or sums, a NaN mean).
ModelFile parse_model_file(const std::string& path);

/// The model files of this host in codelet_dir() whose symbol starts with `prefix`.
std::vector<std::string> model_files(const std::string& prefix = "starfact_");

/// What the pre-flight found. errors: StarPU would abort (or calibration could not be saved);
/// notes: worth saying, harmless.
struct PreflightResult {
    std::vector<std::string> errors, notes;
    bool ok() const { return errors.empty(); }
};

/// Checks the model directory before starpu_init. Always: the sampling directories are
/// directories or can be created, and every "starfact_*" model file of this host parses
/// (unless STARPU_CALIBRATE=2, which does not load them: then a note). When `calibrating`
/// (STARPU_CALIBRATE >= 1 or `starfact calibrate`), also: the codelet directory and the
/// existing model files can be written.
PreflightResult preflight(bool calibrating);

/// preflight(calibrating) that throws ModelFileError with every error (each naming its file
/// and its fix) when any. Returns the notes.
std::vector<std::string> preflight_or_throw(bool calibrating);

/// An exclusive lock (flock) on <codelet_dir()>/.starfact-calibrate.lock, held while one
/// calibration runs so that a second one with the same directory waits and then continues
/// from the first one's models instead of overwriting them. Creates the directory if needed.
class CalibrationLock {
public:
    /// Blocks until the lock is free; `waited` tells whether another process held it.
    CalibrationLock();
    ~CalibrationLock();
    CalibrationLock(const CalibrationLock&) = delete;
    CalibrationLock& operator=(const CalibrationLock&) = delete;
    bool waited() const { return waited_; }
    const std::string& path() const { return path_; }

private:
    int fd_ = -1;
    bool waited_ = false;
    std::string path_;
};

// ---- convergence analysis ------------------------------------------------------------------

/// One measured task (from an execution trace of the calibration).
struct Sample {
    std::string symbol;  ///< the model, e.g. "starfact_gemm_d"
    std::string arch;    ///< "cpu", "cuda0", ... as in ArchModel::arch
    int worker = -1;
    std::uint32_t footprint = 0;
    double duration_us = 0;
    bool had_prediction = true;  ///< false: the scheduler placed it without a calibrated model
};

/// One line of the report: a model, an architecture and a footprint.
struct ReportRow {
    std::string symbol, arch;
    std::uint32_t footprint = 0;
    unsigned long size = 0;
    unsigned nsample = 0;  ///< samples StarPU kept (0 when the file has no entry)
    unsigned minimum = 0;
    double mean_us = 0, rel_dev = 0;  ///< from the file; rel_dev = deviation / mean
    int tasks = 0;                    ///< tasks measured in this run
    int fallback = 0;                 ///< of those, placed without a calibrated model
    double median_us = 0;             ///< median of this run's samples (0 when none)
    /// Under the minimum, but StarPU predicts it with its model's regression (valid, and the
    /// entry's size within the range it predicts): the batched models for slice sizes it fitted.
    bool by_regression = false;
    bool calibrated() const { return (nsample >= minimum && nsample > 0) || by_regression; }
};

struct Report {
    std::vector<ReportRow> rows;
    std::vector<std::string> warnings;
    int uncalibrated() const;
};

/// Thresholds of the warnings.
struct ReportLimits {
    double worker_ratio = 2.0;     ///< two workers of one architecture disagree (median ratio)
    double outlier_ratio = 3.0;    ///< a sample this many times the median (or below 1/ratio)
    double outlier_sigmas = 5.0;   ///< or this many deviations of the other samples from their mean
    double noisy_rel_dev = 0.5;    ///< a file entry whose deviation / mean exceeds this
    double poisoned_ratio = 2.0;   ///< the file's mean vs this run's median
};

/// Rows for every entry of `files` (and for every (symbol, arch, footprint) seen only in
/// `samples`), with warnings: entries under `minimum` samples are counted, noisy entries, a
/// file mean far from the measured median (a poisoned model), workers of one architecture that
/// disagree, and outlier samples. Rows are sorted by symbol, arch, footprint.
Report analyse(const std::vector<ModelFile>& files, const std::vector<Sample>& samples, unsigned minimum,
               const ReportLimits& limits = {});

}  // namespace starfact::models
