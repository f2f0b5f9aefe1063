//! The macros that register remote calls (`remote!`, `remote_pod!`) and
//! make a function a remote call (`remote_fn!`); exported at the crate's
//! root, as `#[macro_export]` puts them.

/// Registers remote calls: `cantus::remote!(Square, Histogram);`. Each type
/// must implement [`Remote`](super::Remote). Use it once per type, at module level; every
/// locale runs the same binary, so the registration is the same
/// everywhere.
#[macro_export]
macro_rules! remote {
    ($($t:ty),+ $(,)?) => {
        $(
            impl $crate::remote::RegisteredCall for $t {
                const NAME: &'static str = concat!(module_path!(), "::", stringify!($t));
            }
            $crate::__private::inventory::submit! {
                $crate::__private::Handler::of::<$t>()
            }
        )+
    };
}

/// Registers plain-data remote calls (types implementing [`RemotePod`](super::RemotePod)):
/// `cantus::remote_pod!(Bump, Read);`. Run them with [`on_pod`](super::on_pod) or
/// [`begin_on_pod`](super::begin_on_pod).
#[macro_export]
macro_rules! remote_pod {
    ($($t:ty),+ $(,)?) => {
        $(
            impl $crate::remote::RegisteredPodCall for $t {
                const NAME: &'static str = concat!(module_path!(), "::", stringify!($t));
            }
            $crate::__private::inventory::submit! {
                $crate::__private::Handler::of_pod::<$t>()
            }
        )+
    };
}

/// A plain function as a remote call: `remote_fn!` turns
/// `fn name(args) -> R { body }` into a registered call type `name`
/// whose fields are the arguments, so `cantus::on(locale, name(a, b))`
/// runs the body there (and `name(a, b).run()` runs it here). The
/// arguments and the result must be serde types (`Serialize +
/// DeserializeOwned + Send + 'static`), and the calling crate needs
/// `serde` (with `derive`) among its dependencies.
///
/// The call type is `Clone` (so that [`pgas::spmd`](crate::pgas::spmd)
/// can send a copy to every locale), so the arguments must be `Clone`
/// too; for an argument that is not, write the call type by hand and
/// implement [`Remote`](super::Remote) for it.
///
/// ```
/// cantus::remote_fn! {
///     /// Multiplies where it runs.
///     fn mul(a: u64, b: u64) -> u64 {
///         a * b
///     }
/// }
///
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| cantus::on(cantus::here(), mul(6, 7)).join()).unwrap(), 42);
/// ```
///
/// Such a call is also an SPMD body: `pgas::spmd(step(3))` runs
/// `step(3)` on every locale at once (the example is in
/// [`pgas::spmd`](crate::pgas::spmd)).
///
/// An argument that cannot travel is a compile-time error that says so
/// (``` `Rc<u64>` cannot be an argument or the result of a remote call```):
///
/// ```compile_fail
/// cantus::remote_fn! {
///     fn shared(x: std::rc::Rc<u64>) -> u64 {
///         *x
///     }
/// }
/// ```
#[macro_export]
macro_rules! remote_fn {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        // Names an argument or result that cannot travel, with what to do
        // (first, so that the compiler reports it first).
        const _: fn() = || {
            fn travels<T: $crate::__private::RemoteData>() {}
            $(travels::<$ty>();)*
            $(travels::<$ret>();)?
        };

        $(#[$meta])*
        #[allow(non_camel_case_types)]
        #[derive(Clone, ::serde::Serialize, ::serde::Deserialize)]
        $vis struct $name($(pub $ty),*);

        impl $crate::Remote for $name {
            type Output = $crate::__remote_output!($($ret)?);
            fn run(self) -> Self::Output {
                let $name($($arg),*) = self;
                $body
            }
        }

        $crate::remote!($name);
    };
}

/// The output type of a `remote_fn!` (`()` when none is written).
#[doc(hidden)]
#[macro_export]
macro_rules! __remote_output {
    () => {
        ()
    };
    ($ret:ty) => {
        $ret
    };
}
