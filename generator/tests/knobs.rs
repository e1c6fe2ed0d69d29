//! Knob files: impossible values are one-line errors naming the field.

use ditto_generator::knobs::{KnobError, Knobs};

fn err(text: &str) -> String {
    let e: KnobError = Knobs::from_toml(text, "knobs.toml").expect_err("must be refused");
    let s = e.to_string();
    assert!(!s.contains('\n'), "not one line: {s}");
    s
}

#[test]
fn impossible_knobs_name_their_field() {
    let s = err("[branches]\ntaken_rate_scale = -1.0\n");
    assert!(s.contains("field `branches.taken_rate_scale`"), "{s}");
    let s = err("[dependencies]\ndistance_scale = nan\n");
    assert!(s.contains("field `dependencies.distance_scale`"), "{s}");
    let s = err("[data_working_set]\nsize_scale = 1000.0\n");
    assert!(s.contains("field `data_working_set.size_scale`"), "{s}");
    let s = err("[instructions]\nskeleton_instructions = -5.0\n");
    assert!(
        s.contains("field `instructions.skeleton_instructions`"),
        "{s}"
    );
    let s = err("[limits]\nmax_buffer_bytes = 5000\n");
    assert!(
        s.contains("field `limits.max_buffer_bytes`") && s.contains("power of two"),
        "{s}"
    );
    let s = err("[data_working_set]\ntail_from_bytes = 1000000\n");
    assert!(
        s.contains("field `data_working_set.tail_from_bytes`") && s.contains("power of two"),
        "{s}"
    );
    let s = err("[data_working_set]\nfar_from_bytes = 40000\n");
    assert!(
        s.contains("field `data_working_set.far_from_bytes`") && s.contains("power of two"),
        "{s}"
    );
    let s = err("[data_working_set]\nmid_from_bytes = 1048576\n");
    assert!(
        s.contains("field `data_working_set.mid_from_bytes`") && s.contains("below"),
        "{s}"
    );
    let s = err("[data_working_set]\nmid_scale = -1.0\n");
    assert!(s.contains("field `data_working_set.mid_scale`"), "{s}");
    let s = err("[data_working_set]\ntail_scale = 0.0\n");
    assert!(s.contains("field `data_working_set.tail_scale`"), "{s}");
    let s = err("[branches]\ndata_dependent_scale = 2.5\n");
    assert!(s.contains("branches.data_dependent_scale"), "{s}");
    let s = err("[limits]\nchunk_instructions = 0\n");
    assert!(s.contains("limits.chunk_instructions"), "{s}");
}

#[test]
fn unknown_or_mistyped_fields_are_refused() {
    let s = err("[branches]\ntaken_rate_scael = 1.0\n");
    assert!(s.contains("taken_rate_scael"), "{s}");
    let s = err("[branches]\ntaken_rate_scale = \"big\"\n");
    assert!(s.contains("line 2"), "{s}");
}

#[test]
fn defaults_are_valid_and_documented() {
    let k = Knobs::default();
    assert!(k.validate().is_ok());
    let doc = k.to_documented_toml(1);
    for key in [
        "per_request_scale",
        "skeleton_instructions",
        "size_scale",
        "mid_scale",
        "mid_from_bytes",
        "tail_scale",
        "tail_from_bytes",
        "far_from_bytes",
        "shared_fraction_scale",
        "taken_rate_scale",
        "transition_rate_scale",
        "data_dependent_scale",
        "distance_scale",
        "max_buffer_bytes",
    ] {
        assert!(doc.contains(&format!("\n{key} = ")), "{key} missing");
    }
    assert_eq!(Knobs::from_toml(&doc, "k").expect("parses"), k);
}
