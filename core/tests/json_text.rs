//! JSON text as hosts write it: what `JSON.stringify` makes of any JavaScript string, lone
//! surrogates included, reads back as the string with each lone surrogate replaced by U+FFFD.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use ferroloop::json_text::lone_surrogates_replaced;
use proptest::prelude::*;

proptest! {
    /// Whatever UTF-16 a JavaScript string holds, its JSON text parses, to the string with
    /// each lone surrogate replaced by U+FFFD (as napi converts a plain string).
    #[test]
    fn any_js_string_parses_to_its_lossy_utf8(
        units in proptest::collection::vec(
            prop_oneof![
                any::<u16>(),
                0xd800u16..0xe000,
                Just(u16::from(b'\\')),
                Just(u16::from(b'u')),
                Just(u16::from(b'd')),
            ],
            0..40,
        ),
    ) {
        let text = common::js_stringify(&units);
        let fixed = lone_surrogates_replaced(&text);
        let parsed: String = serde_json::from_str(&fixed).unwrap();
        prop_assert_eq!(parsed, String::from_utf16_lossy(&units));
    }
}
