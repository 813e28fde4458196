//! Config choices: enums whose every variant has a name in the config and the API, declared
//! with [`choice!`](crate::choice) so that the list of variants ([`Choice::ALL`]), the names,
//! the parser and the "expected …" message of a bad value all come from one declaration.
//!
//! The anchor is hickory's `RecordType`: one enum with its conversions and facts beside it.
//! Facts beyond the name (what a steering policy reads, whether it draws, whether DNS can plan
//! it ahead) are exhaustive `match`es next to the enum, so a new variant does not compile until
//! each is given. Without a name it does not compile either:
//!
//! ```compile_fail
//! lb_core::choice! {
//!     /// A variant without its name is refused by the macro itself.
//!     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
//!     pub enum Colour {
//!         Red => "red",
//!         Green,
//!     }
//! }
//! ```
//!
//! ```compile_fail
//! lb_core::choice! {
//!     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
//!     pub enum Colour {
//!         Red => "red",
//!         Green => "green",
//!     }
//! }
//! impl Colour {
//!     /// A fact that forgets a variant is a non-exhaustive match.
//!     pub fn warm(self) -> bool {
//!         match self {
//!             Colour::Red => true,
//!         }
//!     }
//! }
//! ```
//!
//! ```
//! use lb_core::Choice;
//! lb_core::choice! {
//!     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
//!     pub enum Colour {
//!         Red => "red",
//!         Green => "green",
//!     }
//! }
//! assert_eq!(Colour::ALL, [Colour::Red, Colour::Green]);
//! assert_eq!(Colour::parse("green"), Some(Colour::Green));
//! assert_eq!(Colour::expected(), "red or green");
//! ```

/// An enum of config choices: every variant, each one's name, and the parse that follows.
pub trait Choice: Copy + Eq + Sized + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];

    /// The variant's name in the config and the API.
    fn name(self) -> &'static str;

    /// The variant named `name`, if any (names are case-sensitive, as Cloudflare's are).
    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// Every name, for an "expected …" message: `a, b or c`.
    fn expected() -> String {
        one_of(Self::ALL.iter().map(|c| c.name()))
    }
}

/// `a`, `a or b`, `a, b or c`.
pub fn one_of<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Declares a fieldless enum whose every variant is written `Variant => "name"`, with
/// `ALL`, `name()` and `parse()` as inherent items and [`Choice`] implemented from them. The
/// enum's attributes (derives included) are written as on any enum.
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The variant's name in the config and the API.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The variant named `name`, if any.
            pub fn parse(name: &str) -> Option<$name> {
                <$name as $crate::choice::Choice>::parse(name)
            }
        }

        impl $crate::choice::Choice for $name {
            const ALL: &'static [$name] = $name::ALL;

            fn name(self) -> &'static str {
                $name::name(self)
            }
        }
    };
}
