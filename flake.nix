{
  # Nix: a development shell and the gateway as a package. Not exercised by the test suite (the test
  # machines have no Nix); `tooldock build` itself needs no Nix.
  #   nix develop            # python 3.11, uv, skopeo, umoci, docker client
  #   nix build .#tooldock   # the `tooldock` command
  description = "ToolDock: serve folders of Python @tool functions over MCP and REST";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";
  inputs.flake-utils.url = "github:numtide/flake-utils";

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = nixpkgs.legacyPackages.${system};
        python = pkgs.python311;
        tooldock = python.pkgs.buildPythonApplication {
          pname = "tooldock";
          version = "0.1.0";
          pyproject = true;
          src = ./.;
          build-system = [ python.pkgs.hatchling ];
          # mcp 2.x is newer than nixpkgs 24.11 ships; relax the check and provide it from an overlay
          # when packaging for production.
          pythonRelaxDeps = [ "mcp" ];
          dependencies = with python.pkgs; [ fastapi uvicorn mcp pyyaml click rich docker jinja2 httpx ];
          makeWrapperArgs = [ "--prefix PATH : ${pkgs.uv}/bin" ];
          doCheck = false;
        };
      in {
        packages.tooldock = tooldock;
        packages.default = tooldock;
        devShells.default = pkgs.mkShell {
          packages = [ python pkgs.uv pkgs.skopeo pkgs.umoci pkgs.docker-client pkgs.nodejs_22 ];
          shellHook = ''
            [ -d .venv ] || python -m venv .venv
            . .venv/bin/activate
          '';
        };
      });
}
