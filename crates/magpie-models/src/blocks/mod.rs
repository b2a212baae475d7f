//! Parts shared by every architecture: attention (with the KV cache), MLPs, norms, rotary embeddings.

pub mod activation;
pub mod attention;
pub mod conv1d;
pub mod kv_cache;
pub mod load;
pub mod mlp;
pub mod rope;

/// Implements [`magpie_nn::Module`] for a struct whose children are the listed fields, under the
/// listed names (the Hugging Face parameter path), so `named_parameters()` gives checkpoint names.
/// `optional [f => "name"]` lists `Option` children (an untied head, a pooler), present when `Some`;
/// `training = f` keeps the training flag in the bool field `f`; `forward = path` makes
/// `Module::forward` call `path(self, x)` (modules with one input).
macro_rules! module_children {
    ($ty:ty, $name:literal, [$($field:ident => $key:literal),* $(,)?]
     $(, optional [$($ofield:ident => $okey:literal),* $(,)?])?
     $(, training = $tfield:ident)?
     $(, forward = $f:path)?) => {
        impl magpie_nn::Module for $ty {
            fn type_name(&self) -> &'static str {
                $name
            }
            $(fn forward(&self, x: &magpie_core::Tensor) -> magpie_core::Result<magpie_core::Tensor> {
                $f(self, x)
            })?
            #[allow(unused_mut)]
            fn children(&self) -> Vec<(String, &dyn magpie_nn::Module)> {
                let mut c: Vec<(String, &dyn magpie_nn::Module)> = vec![$(($key.to_string(), &self.$field as &dyn magpie_nn::Module)),*];
                $($(if let Some(m) = &self.$ofield {
                    c.push(($okey.to_string(), m as &dyn magpie_nn::Module));
                })*)?
                c
            }
            #[allow(unused_mut)]
            fn children_mut(&mut self) -> Vec<(String, &mut dyn magpie_nn::Module)> {
                let mut c: Vec<(String, &mut dyn magpie_nn::Module)> = vec![$(($key.to_string(), &mut self.$field as &mut dyn magpie_nn::Module)),*];
                $($(if let Some(m) = &mut self.$ofield {
                    c.push(($okey.to_string(), m as &mut dyn magpie_nn::Module));
                })*)?
                c
            }
            $(fn set_training(&mut self, training: bool) {
                self.$tfield = training;
            }
            fn is_training(&self) -> bool {
                self.$tfield
            })?
        }
    };
}
pub(crate) use module_children;
