// JSX by esbuild's automatic runtime: no plugin to install.
export default { esbuild: { jsx: "automatic" } };
