"""The coresvm command line end to end on tiny LIBSVM files, and every user error it must report in one line."""

import bz2
import gzip
import io
import json
import lzma
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, load_iris, load_svmlight_file, make_classification

import coresvm
from coresvm import load_model
from coresvm.cli import Progress, main
from coresvm.cli.predict import widen_model

svmutil = pytest.importorskip("libsvm.svmutil")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A binary train/test pair (labels -1/+1) and iris (labels 1-3), as LIBSVM text files."""
    root = tmp_path_factory.mktemp("data")
    X, y = make_classification(n_samples=180, n_features=5, n_informative=3, random_state=0)
    y = 2 * y - 1
    dump(X[:120], y[:120], root / "train.txt")
    dump(X[120:], y[120:], root / "test.txt")
    Xi, yi = load_iris(return_X_y=True)
    dump(Xi, yi + 1, root / "iris.txt")
    return root


def dump(X, y, path):
    dump_svmlight_file(X, y, str(path), zero_based=False)


def run(capsys, *argv):
    """Run the CLI; return (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(capsys, *argv, match: str):
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one clear line ...
    assert "Traceback" not in err  # ... never a traceback
    assert match in lines[0], lines[0]


# --------------------------------------------------------------------------- train / predict
def test_train_predict_native(capsys, files, tmp_path):
    model_path, out_path = tmp_path / "m.model", tmp_path / "out.txt"
    code, out, _ = run(capsys, "train", "-c", 10, "-g", 0.3, files / "train.txt", model_path)
    assert code == 0 and "model written to" in out and "#SV" in out
    code, out, _ = run(capsys, "predict", files / "test.txt", model_path, out_path)
    assert code == 0 and out.startswith("Accuracy = ")
    predictions = np.loadtxt(out_path)
    X, y = load_svmlight_file(str(files / "test.txt"), zero_based=False, n_features=5)
    model = load_model(model_path)
    np.testing.assert_array_equal(predictions, model.predict(X))
    correct = int(np.sum(predictions == y))
    assert f"({correct}/60)" in out
    assert model.get_params()["C"] == 10 and model.get_params()["gamma"] == 0.3


def test_model_from_train_predicts_identically_in_libsvm(capsys, files, tmp_path):
    for data in ("train.txt", "iris.txt"):
        model_path, out_path = tmp_path / f"{data}.model", tmp_path / "out.txt"
        code, _, _ = run(capsys, "train", "-q", "-c", 10, "-g", 0.5, "--format", "libsvm", files / data, model_path)
        assert code == 0
        assert run(capsys, "predict", "-q", files / data, model_path, out_path)[0] == 0
        y, x = svmutil.svm_read_problem(str(files / data))
        labels, _, _ = svmutil.svm_predict(y, x, svmutil.svm_load_model(str(model_path)), "-q")
        np.testing.assert_array_equal(np.loadtxt(out_path), labels)


def test_libsvm_style_options(capsys, files, tmp_path):
    # svm-train spellings: -s 0 -t 1 -d 2 -r 1 -wLABEL W -h 0 -m cache -e tol -b 0
    path = tmp_path / "poly.model"
    code, _, err = run(capsys, "train", "-q", "-s", 0, "-t", 1, "-d", 2, "-r", 1, "-g", 0.2, "-c", 4, "-w1", 2,
                       "-h", 0, "-m", 50, "-e", 0.001, "-b", 0, files / "train.txt", path)
    assert code == 0, err
    params = load_model(path).get_params()
    assert (params["kernel"], params["degree"], params["coef0"], params["C"]) == ("poly", 2, 1.0, 4.0)
    assert params["class_weight"] == {1: 2.0} and params["cache_size"] == 50 and params["tol"] == 0.001


def test_gsvm_style_options(capsys, files, tmp_path):
    path = tmp_path / "g.model"
    code, _, err = run(capsys, "train", "-q", "-c", 8, "-g", 0.25, "-E", 1.5, "-b", "nobias", "-z", "gmdm", "-k",
                       0.3, "-S", 20, "-t", "sparse", "-p", "mn", "-s", "simple", "-u", "pairwise", "--gsvm", "-d",
                       100, "-I", files / "train.txt", path)
    assert code == 0, err
    model = load_model(path)
    params = model.get_params()
    assert params["eta"] == 1.5 and params["bias"] is False and params["selection"] == "gmdm"
    assert params["gmdm_k"] == 0.3 and params["cache_size"] == 20
    assert params["sample_size"] == 100 and params["n_candidates"] == 100
    assert params["draws"] == 100  # gsvm's -d is the draw number of the gsvm-family search too
    assert np.all(model.intercept_ == 0)
    assert model.support_vectors_.format == "csr"


def test_long_solver_options_and_param(capsys, files, tmp_path):
    path = tmp_path / "s.model"
    code, _, err = run(capsys, "train", "-q", "--solver", "swap", "--vertex-search", "full", "--kernel", "linear",
                       "--max-iter", 500, "--param", "n_init=10", "--seed", 3, files / "train.txt", path)
    assert code == 0, err
    params = load_model(path).get_params()
    assert (params["solver"], params["search"], params["kernel"]) == ("swap", "full", "linear")
    assert (params["max_iter"], params["n_init"], params["random_state"]) == (500, 10, 3)


def test_train_default_model_name_and_v(capsys, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "train", "-q", files / "train.txt")[0] == 0
    assert (tmp_path / "train.txt.model").exists()
    code, out, _ = run(capsys, "train", "-q", "-v", 3, "-c", 10, files / "train.txt")
    assert code == 0 and out.startswith("Cross Validation Accuracy = ")


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2", ".csv", ".csv.gz", ".npy"])
def test_data_formats(capsys, files, tmp_path, suffix):
    X, y = load_svmlight_file(str(files / "train.txt"), zero_based=False)
    X = X.toarray()
    path = tmp_path / f"train{suffix}"
    if suffix in (".gz", ".xz", ".bz2"):
        opener = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}[suffix]
        with opener(path, "wb") as handle:
            handle.write((files / "train.txt").read_bytes())
    elif suffix.startswith(".csv"):
        text = "label," + ",".join(f"f{j}" for j in range(5)) + "\n"
        rows = zip(y, X, strict=True)
        text += "".join(f"{int(label)}," + ",".join(repr(float(v)) for v in row) + "\n" for label, row in rows)
        path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    else:
        np.save(path, np.column_stack([y, X]))
    assert run(capsys, "train", "-q", "-c", 10, "-g", 0.3, path, tmp_path / "a.model")[0] == 0
    assert run(capsys, "train", "-q", "-c", 10, "-g", 0.3, "-t", "dense", files / "train.txt", tmp_path / "b.model")[
        0] == 0
    np.testing.assert_array_equal(load_model(tmp_path / "a.model").decision_function(X),
                                  load_model(tmp_path / "b.model").decision_function(X))


def test_predict_data_with_more_or_fewer_features(capsys, files, tmp_path):
    run(capsys, "train", "-q", "-c", 10, "-g", 0.3, "--format", "libsvm", files / "train.txt", tmp_path / "m.model")
    X, y = load_svmlight_file(str(files / "test.txt"), zero_based=False)
    wide = np.column_stack([X.toarray(), np.full(len(y), 0.5)])
    dump(wide, y, tmp_path / "wide.txt")
    code, _, err = run(capsys, "predict", tmp_path / "wide.txt", tmp_path / "m.model", tmp_path / "out.txt")
    assert code == 0 and "extra features" in err
    yw, xw = svmutil.svm_read_problem(str(tmp_path / "wide.txt"))
    labels, _, _ = svmutil.svm_predict(yw, xw, svmutil.svm_load_model(str(tmp_path / "m.model")), "-q")
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "out.txt"), labels)  # as LIBSVM treats them
    narrow = X.toarray()[:, :3]
    dump(narrow, y, tmp_path / "narrow.txt")
    assert run(capsys, "predict", "-q", tmp_path / "narrow.txt", tmp_path / "m.model", tmp_path / "o.txt")[0] == 0


def test_predict_decision_values(capsys, files, tmp_path):
    run(capsys, "train", "-q", "-c", 10, "-g", 0.5, files / "iris.txt", tmp_path / "m.model")
    assert run(capsys, "predict", "-q", "--decision-values", files / "iris.txt", tmp_path / "m.model",
               tmp_path / "out.txt")[0] == 0
    table = np.loadtxt(tmp_path / "out.txt")
    assert table.shape == (150, 4)
    X, _ = load_svmlight_file(str(files / "iris.txt"), zero_based=False)
    np.testing.assert_array_equal(table[:, 1:], load_model(tmp_path / "m.model").decision_function(X.toarray()))


# --------------------------------------------------------------------------- cv / select
def test_cv_kfold(capsys, files):
    code, out, _ = run(capsys, "cv", "-c", 10, "-g", 0.3, "-i", 4, files / "train.txt")
    assert code == 0
    assert sum(line.startswith("fold ") for line in out.splitlines()) == 4 and "Cross Validation Accuracy = " in out
    accuracy = float(out.split("Cross Validation Accuracy = ")[1].split("%")[0])
    assert accuracy > 70
    code, out, _ = run(capsys, "cv", "-q", "-v", 3, files / "iris.txt")  # LIBSVM's -v
    assert code == 0 and out.startswith("Cross Validation Accuracy = ")


def test_cv_nested(capsys, files):
    code, out, _ = run(capsys, "cv", "-c", 1, "-C", 100, "-g", 0.1, "-G", 1, "--resolution", 2, "-i", 2, "-o", 3,
                       "-m", "grid", files / "train.txt")
    assert code == 0
    assert out.count("outer fold") == 3 and "Nested Cross Validation Accuracy = " in out
    # gsvm's own spelling of the same run: -r is the resolution with --gsvm (whose other defaults are undone)
    code, out_gsvm, _ = run(capsys, "cv", "--gsvm", "-c", 1, "-C", 100, "-g", 0.1, "-G", 1, "-r", 2, "-i", 2, "-o",
                            3, "-m", "grid", "--solver", "coreset", "-u", "pairwise", "-z", "imdm", "-s", "simple",
                            files / "train.txt")
    assert code == 0
    assert [line for line in out_gsvm.splitlines() if "accuracy" in line.lower()] == \
        [line for line in out.splitlines() if "accuracy" in line.lower()]


def test_select_grid_and_final_model(capsys, files, tmp_path):
    code, out, _ = run(capsys, "select", "-c", 1, "-C", 100, "-g", 0.1, "-G", 1, "--resolution", 3, "-i", 3,
                       files / "train.txt", tmp_path / "best.model")
    assert code == 0
    table = [line for line in out.splitlines() if len(line.split()) == 3 and line.split()[0][0].isdigit()]
    assert len(table) == 9
    assert "Best: C = " in out
    best = load_model(tmp_path / "best.model").get_params()
    assert f"Best: C = {best['C']:g}, gamma = {best['gamma']:g}" in out
    code, out, _ = run(capsys, "select", "-q", "--log2c", "0,4,2", "--log2g", "-2,-4,-1", "-v", 2,
                       files / "train.txt")
    assert code == 0 and out.startswith("Best: C = ")
    assert float(out.split("C = ")[1].split(",")[0]) in (1, 4, 16)


def test_select_pattern_search_only_when_available(capsys, files):
    if hasattr(coresvm, "PatternSearchCV"):
        pytest.skip("PatternSearchCV exists; the usage error no longer applies")
    assert_usage_error(capsys, "select", "-m", "pattern", files / "train.txt", match="not available yet")
    assert_usage_error(capsys, "select", "--search", "pattern", files / "train.txt", match="not available yet")


# --------------------------------------------------------------------------- scale / info / help / demo
def test_scale_save_and_restore(capsys, files, tmp_path):
    code, out, _ = run(capsys, "scale", "-l", 0, "-u", 1, "-s", tmp_path / "range", files / "train.txt")
    assert code == 0
    X, y = load_svmlight_file(io.BytesIO(out.encode()), zero_based=False, n_features=5)
    assert X.min() >= 0 and X.max() <= 1 and np.allclose(X.toarray().max(axis=0), 1)
    lines = (tmp_path / "range").read_text().splitlines()
    assert lines[0] == "x" and [float(v) for v in lines[1].split()] == [0, 1] and len(lines) == 2 + 5
    original, _ = load_svmlight_file(str(files / "train.txt"), zero_based=False)
    index, low, high = lines[2].split()
    assert int(index) == 1 and float(low) == original[:, 0].min() and float(high) == original[:, 0].max()
    code, _, _ = run(capsys, "scale", "-r", tmp_path / "range", "--output", tmp_path / "test.scaled",
                     files / "test.txt")
    assert code == 0
    scaled, _ = load_svmlight_file(str(tmp_path / "test.scaled"), zero_based=False, n_features=5)
    test, _ = load_svmlight_file(str(files / "test.txt"), zero_based=False)
    minimum, maximum = original.toarray().min(axis=0), original.toarray().max(axis=0)
    np.testing.assert_allclose(scaled.toarray(), (test.toarray() - minimum) / (maximum - minimum), atol=1e-12)
    code, out, _ = run(capsys, "scale", files / "train.txt")  # svm-scale's default range [-1, 1]
    X, _ = load_svmlight_file(io.BytesIO(out.encode()), zero_based=False, n_features=5)
    assert X.min() == -1 and X.max() == 1


def test_info(capsys, files, tmp_path):
    run(capsys, "train", "-q", "-c", 10, "-g", 0.5, files / "iris.txt", tmp_path / "m.model")
    code, out, _ = run(capsys, "info", tmp_path / "m.model")
    assert code == 0
    for text in ("native model, format version 2", "rbf exp(-0.5", "classes:          1 2 3", "coreset",
                 "theoretic", "one-vs-one", "fit status"):
        assert text in out, text
    code, out, _ = run(capsys, "info", "--json", tmp_path / "m.model")
    summary = json.loads(out)["summary"]
    assert summary["classes"] == [1, 2, 3] and summary["n_features"] == 4
    run(capsys, "train", "-q", "--format", "libsvm", files / "iris.txt", tmp_path / "l.model")
    code, out, _ = run(capsys, "info", tmp_path / "l.model")
    assert code == 0 and "LIBSVM text model" in out


def test_help_is_documentation(capsys):
    for argv in (["--help"], ["train", "--help"], ["cv", "--help"], ["select", "--help"], ["scale", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "usage: coresvm" in out
    out = run(capsys, "train", "--help")[1]
    assert "examples" in out and "--gsvm" in out and "-t sparse|dense" in out and "--max-time" in out


def test_demo_still_runs(capsys):
    code, out, _ = run(capsys, "demo", "--n", 2000, "--n-test", 500, "--max-time", 2, "--svc-fraction", 0.1)
    assert code == 0 and "coresvm CoreSVC(coreset)" in out and "scikit-learn SVC" in out


def test_quiet_runs_print_nothing(capsys, files, tmp_path):
    code, out, err = run(capsys, "train", "-q", files / "train.txt", tmp_path / "m.model")
    assert code == 0 and out == "" and err == ""


def test_progress_bar_only_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress("coresvm cv", total=4) as progress:
        for _ in range(4):
            progress.step()
        progress.render(force=True)
    assert "[" + "#" * Progress.WIDTH + "] 4/4" in terminal.getvalue()
    with Progress("coresvm cv", total=4, enabled=False) as progress:  # -q
        progress.step()
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    with Progress("coresvm train", budget=1.0) as progress:
        progress.render(force=True)
    assert pipe.getvalue() == ""
    assert terminal.getvalue().count("coresvm cv") >= 2


# --------------------------------------------------------------------------- errors: exit 2, one line
def test_missing_files(capsys, files, tmp_path):
    assert_usage_error(capsys, "train", tmp_path / "nope.txt", match="file not found")
    assert_usage_error(capsys, "predict", files / "test.txt", tmp_path / "nope.model", tmp_path / "o",
                       match="file not found")
    assert_usage_error(capsys, "predict", tmp_path / "nope.txt", files / "test.txt", tmp_path / "o",
                       match="file not found")
    assert_usage_error(capsys, "info", tmp_path / "nope.model", match="file not found")
    assert_usage_error(capsys, "scale", "-r", tmp_path / "nope", files / "train.txt", match="file not found")
    assert_usage_error(capsys, "train", match="no data file given")


def test_unreadable_line_n(capsys, tmp_path):
    (tmp_path / "bad.txt").write_text("1 1:0.5 2:1\n-1 2:0.3\n1 1:abc\n-1 2:1\n")
    assert_usage_error(capsys, "train", tmp_path / "bad.txt", match="bad.txt: unreadable line 3")
    (tmp_path / "unsorted.txt").write_text("1 1:0.5\n-1 2:0.3\n1 1:1\n-1 3:1 2:1\n")
    assert_usage_error(capsys, "train", tmp_path / "unsorted.txt", match="unreadable line 4")
    (tmp_path / "negative.txt").write_text("1 1:0.5\n-1 -1:0.3\n")
    assert_usage_error(capsys, "train", tmp_path / "negative.txt", match="unreadable line 2")
    (tmp_path / "bad.csv").write_text("y,a,b\n1,0.5,1\n-1,0.5,1\n1,0.5\n")
    assert_usage_error(capsys, "train", tmp_path / "bad.csv", match="bad.csv: unreadable line 4")
    (tmp_path / "bad2.csv").write_text("1,0.5,1\n-1,x,1\n")
    assert_usage_error(capsys, "train", tmp_path / "bad2.csv", match="unreadable line 2")
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    assert_usage_error(capsys, "train", tmp_path / "bad.gz", match="cannot read")
    (tmp_path / "empty.txt").write_text("")
    assert_usage_error(capsys, "train", tmp_path / "empty.txt", match="no data")
    (tmp_path / "one.txt").write_text("1 1:0.5\n1 1:0.7\n")
    assert_usage_error(capsys, "train", tmp_path / "one.txt", match="at least 2 classes")


def test_unknown_options_and_commands(capsys, files):
    assert_usage_error(capsys, "train", "--bogus", files / "train.txt", match="unrecognized arguments: --bogus")
    assert_usage_error(capsys, "train", "-x", files / "train.txt", match="unrecognized arguments")
    assert_usage_error(capsys, "frobnicate", match="invalid choice")
    assert_usage_error(capsys, "train", "--param", "warp=9", files / "train.txt", match="no parameter warp")


@pytest.mark.parametrize("argv, match", [
    (["-c", "abc"], "invalid float value: 'abc'"),
    (["-c", "-1"], "C must be > 0"),
    (["-g", "wide"], "-g (gamma"),
    (["-g", "-2"], "gamma must be > 0"),
    (["-e", "tight"], "-e (tolerance)"),
    (["-t", "7"], "-t takes a kernel type"),
    (["-t", "4"], "precomputed kernels are not supported"),
    (["-s", "2"], "only C-SVC"),
    (["-p", "radius"], "mn|adjmn|meb"),
    (["-p", "0.1"], "epsilon-SVR"),
    (["-m", "lots"], "-m (cache size"),
    (["-E", "2.5"], "eta"),
    (["--solver", "smo"], "invalid choice"),
    (["-w7", "2"], "label 7, which is not in the data"),
    (["--param", "n_init=1"], "n_init"),
])
def test_bad_values(capsys, files, argv, match):
    assert_usage_error(capsys, "train", *argv, files / "train.txt", match=match)


def test_bad_cv_and_select_values(capsys, files):
    assert_usage_error(capsys, "cv", "-i", 1, files / "train.txt", match="at least 2 folds")
    assert_usage_error(capsys, "cv", "-i", 500, files / "train.txt", match="500 folds")
    assert_usage_error(capsys, "cv", "-C", 10, files / "train.txt", match="nested CV")
    assert_usage_error(capsys, "cv", "-o", 3, files / "train.txt", match="needs a C or gamma range")
    assert_usage_error(capsys, "select", "-c", 10, "-C", 1, files / "train.txt", match="above the upper end")
    assert_usage_error(capsys, "select", "--log2c", "1,2", files / "train.txt", match="BEGIN,END,STEP")
    assert_usage_error(capsys, "select", "--resolution", 0, files / "train.txt", match="resolution")
    assert_usage_error(capsys, "scale", "-l", 1, "-u", 0, files / "train.txt", match="lower < upper")


def test_bad_model_files(capsys, files, tmp_path):
    assert_usage_error(capsys, "predict", files / "test.txt", files / "train.txt", tmp_path / "o",
                       match="not a model file")
    run(capsys, "train", "-q", files / "train.txt", tmp_path / "m.model")
    data = (tmp_path / "m.model").read_bytes()
    (tmp_path / "cut.model").write_bytes(data[: len(data) // 3])
    assert_usage_error(capsys, "predict", files / "test.txt", tmp_path / "cut.model", tmp_path / "o",
                       match="truncated or corrupt")
    assert_usage_error(capsys, "info", tmp_path / "cut.model", match="truncated or corrupt")
    assert_usage_error(capsys, "predict", "-b", 1, files / "test.txt", tmp_path / "m.model", tmp_path / "o",
                       match="probability")
    assert_usage_error(capsys, "train", "-q", files / "train.txt", tmp_path / "no" / "dir" / "m.model",
                       match="m.model")


@pytest.mark.parametrize("argv, params", [
    (["-b", "average"], {"bias": "kkt"}),
    (["-s", "fair"], {"sampling": "stratified"}),
    (["-p", "adjmn", "--solver", "mnsvm", "-e", "0.01"], {"stopping": "adjmn", "solver": "mnsvm", "eps": 0.01}),
    (["-p", "meb", "--solver", "sphere"], {"stopping": "meb", "solver": "sphere"}),
    (["-u", "allatonce"], {"multiclass": "joint"}),
    (["-u", "onevsrest"], {"multiclass": "ovr"}),
    (["-u", "pairwise"], {"multiclass": "ovo"}),
    (["-b", "1"], {"probability": True}),
])
def test_gsvm_options_reach_the_estimator(capsys, files, tmp_path, argv, params):
    model_path = tmp_path / "m.model"
    assert main(["train", *argv, str(files / "train.txt"), str(model_path)]) == 0
    model = coresvm.load_model(model_path)
    for name, value in params.items():
        assert model.get_params()[name] == value


# --------------------------------------------------------------------------- zero-based LIBSVM files
@pytest.fixture(scope="module")
def zero_based(tmp_path_factory):
    """scikit-learn's default dump (zero_based=True): the training file has index 0, the test file not
    (its feature 0 is zero in every row), so 'auto' alone would read the two files differently."""
    root = tmp_path_factory.mktemp("zero")
    X, y = make_classification(n_samples=180, n_features=5, n_informative=3, random_state=1)
    y = 2 * y - 1
    X_test = X[120:].copy()
    X_test[:, 0] = 0.0
    dump_svmlight_file(X[:120], y[:120], str(root / "train0.txt"))
    dump_svmlight_file(X_test, y[120:], str(root / "test0.txt"))
    assert " 0:" in (root / "train0.txt").read_text() and " 0:" not in (root / "test0.txt").read_text()
    return root, X[:120], y[:120], X_test, y[120:]


@pytest.mark.parametrize("format", ["native", "libsvm"])
def test_zero_based_files_train_and_predict_column_for_column(capsys, zero_based, tmp_path, format):
    root, X, y, X_test, y_test = zero_based
    model_path, out_path = tmp_path / "m.model", tmp_path / "out.txt"
    code, _, err = run(capsys, "train", "-q", "-c", 10, "-g", 0.3, "--format", format, root / "train0.txt",
                       model_path)
    assert code == 0, err
    assert run(capsys, "predict", "-q", root / "test0.txt", model_path, out_path)[0] == 0
    reference = coresvm.CoreSVC(C=10, gamma=0.3, random_state=0).fit(X, y)
    expected = reference.predict(X_test)
    assert np.mean(expected == y_test) > 0.7  # a model worth comparing against
    np.testing.assert_array_equal(np.loadtxt(out_path), expected)
    model = load_model(model_path)
    assert model.n_features_in_ == 5 and model.libsvm_index_base_ == 0
    if format == "libsvm":  # the SVs keep the file's own indices, so LIBSVM's svm-predict reads the test file alike
        assert any(" 0:" in line for line in model_path.read_text().split("SV\n", 1)[1].splitlines())
        y_lib, x_lib = svmutil.svm_read_problem(str(root / "test0.txt"))
        labels, _, _ = svmutil.svm_predict(y_lib, x_lib, svmutil.svm_load_model(str(model_path)), "-q")
        np.testing.assert_array_equal(labels, expected)


def test_one_based_model_reads_an_index_0_as_a_feature_it_never_saw(capsys, files, tmp_path):
    """A model trained on a one-based file: a test file's index 0 is a feature outside the model's columns
    (zero in every SV, as LIBSVM takes it), and indices 1.. keep their columns."""
    model_path, out_path = tmp_path / "m.model", tmp_path / "out.txt"
    assert run(capsys, "train", "-q", "-c", 10, "-g", 0.3, files / "train.txt", model_path)[0] == 0
    X, y = load_svmlight_file(str(files / "test.txt"), zero_based=False, n_features=5)
    extra = np.full((X.shape[0], 1), 0.7)
    dump_svmlight_file(np.hstack([extra, X.toarray()]), y, str(tmp_path / "test0.txt"))  # index 0 = extra
    assert run(capsys, "predict", "-q", tmp_path / "test0.txt", model_path, out_path)[0] == 0
    model = load_model(model_path)
    assert model.libsvm_index_base_ == 1
    wide = widen_model(model, 6)
    expected = wide.predict(np.hstack([X.toarray(), extra]))
    np.testing.assert_array_equal(np.loadtxt(out_path), expected)


def test_scale_keeps_zero_based_indices(capsys, zero_based, tmp_path):
    root, X, _, _, _ = zero_based
    code, out, _ = run(capsys, "scale", "-l", 0, "-u", 1, "-s", tmp_path / "range", root / "train0.txt")
    assert code == 0
    scaled, _ = load_svmlight_file(io.BytesIO(out.encode()), zero_based=True, n_features=5)
    minimum, maximum = X.min(axis=0), X.max(axis=0)
    np.testing.assert_allclose(scaled.toarray(), (X - minimum) / (maximum - minimum), atol=1e-12)
    assert (tmp_path / "range").read_text().splitlines()[2].split()[0] == "0"


def test_allatonce_with_a_solver_that_cannot_solve_it_says_what_solves_it(capsys, files):
    """-u allatonce is solved by mnsvm, sphere and the core-set solvers; bvm and the Frank-Wolfe family
    evaluate y_i y_j: the command says so (and what to use) instead of the estimator's bare parameter error."""
    for solver in ("bvm", "swap"):
        assert_usage_error(capsys, "train", "-u", "allatonce", "--solver", solver, files / "iris.txt",
                           match="-u allatonce: the all-at-once machine (Strack 2013, sec. 5.4) is solved by "
                                 "--solver mnsvm, sphere, coreset or cvm")


@pytest.mark.parametrize("gsvm", [[], ["--gsvm"]])
def test_allatonce_mnsvm_trains_and_predicts(capsys, files, tmp_path, gsvm):
    """gsvm's own multiclass method (Strack 2013, sec. 5.4): all-at-once MNSVM, one model for the three classes."""
    model_path, out_path = tmp_path / "m.model", tmp_path / "out.txt"
    code, out, err = run(capsys, "train", *gsvm, "-u", "allatonce", "--solver", "mnsvm", "-c", 10, "-g", 0.5,
                         files / "iris.txt", model_path)
    assert code == 0, err
    model = load_model(model_path)
    params = model.get_params()
    assert (params["multiclass"], params["solver"]) == ("joint", "mnsvm")
    code, out, err = run(capsys, "predict", files / "iris.txt", model_path, out_path)
    assert code == 0, err
    X, y = load_svmlight_file(str(files / "iris.txt"), zero_based=False)
    assert model.decision_function(X).shape == (150, 3) and len(model.solver_info_) == 1
    predictions = np.loadtxt(out_path)
    np.testing.assert_array_equal(predictions, model.predict(X))
    assert np.mean(predictions == y) > 0.9 and out.startswith("Accuracy = ")


def test_gsvm_switch_gives_gsvm_defaults_and_options_still_win(capsys, files, tmp_path):
    """--gsvm: what the command line leaves unset takes gsvm's defaults (MNSVM, all-at-once, MDM, fair
    sampling, pattern search; Strack 2013, Appendix A); every option given wins."""
    from coresvm.cli import build_parser
    from coresvm.cli.settings import resolve

    def resolved(*argv):
        return resolve(build_parser().parse_args(["cv", *argv, "data.txt"]), "cv")

    settings = resolved("--gsvm")
    assert settings.params["solver"] == "mnsvm" and settings.params["multiclass"] == "joint"
    assert settings.params["selection"] == "mdm" and settings.params["sampling"] == "stratified"
    assert settings.search == "pattern"
    plain = resolved()
    assert not {"solver", "multiclass", "selection", "sampling"} & set(plain.params) and plain.search is None
    given = resolved("--gsvm", "-u", "pairwise", "-z", "imdm", "-s", "simple", "-m", "grid", "--solver", "sphere")
    assert (given.params["multiclass"], given.params["selection"], given.params["solver"]) == ("ovo", "imdm", "sphere")
    assert given.params["sampling"] == "uniform" and given.search == "grid"
    assert resolved("--gsvm", "--solver", "bvm").params.get("multiclass") is None  # bvm cannot solve all-at-once
    model_path = tmp_path / "g.model"
    assert run(capsys, "train", "-q", "--gsvm", "-c", 10, "-g", 0.5, files / "iris.txt", model_path)[0] == 0
    params = load_model(model_path).get_params()
    assert (params["solver"], params["multiclass"], params["selection"], params["sampling"]) == \
        ("mnsvm", "joint", "mdm", "stratified")


def test_search_help_does_not_promise_a_future_pattern_search(capsys):
    main(["select", "--help"])
    out = capsys.readouterr().out
    assert "when coresvm has" not in out and "pattern search (PatternSearchCV)" in " ".join(out.split())
