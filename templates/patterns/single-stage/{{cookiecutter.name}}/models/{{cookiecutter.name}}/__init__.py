{{ cookiecutter.license_header }}
"""{{ cookiecutter.camel }}: LM + codec in one AR worker (omnitts pattern single-stage)."""

{% set n = cookiecutter.name %}{% set c = cookiecutter.camel %}{% set entries = [("configuration_" ~ n, c ~ "Config"), ("modeling_" ~ n, c ~ "ForGeneration")] %}{% for module, cls in entries | sort %}from .{{ module }} import {{ cls }}
{% endfor %}
__all__ = [
    "{{ c }}Config",
    "{{ c }}ForGeneration",
]
