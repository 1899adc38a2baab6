"""Console for GPU flavors, cohorts, quotas and priority classes."""

from django.contrib import admin

from .models import Cohort, GpuFlavor, PriorityClass, Quota


@admin.register(GpuFlavor)
class GpuFlavorAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "scheduler", "resource_name", "gpus_per_node",
                    "gpu_memory_gib", "cost_per_gpu_hour"]
    list_filter = ["scheduler", "resource_name"]
    search_fields = ["name", "display_name", "resource_name"]


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name"]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["team", "flavor", "cohort", "nominal_gpus", "borrowing_limit_gpus",
                    "lending_limit_gpus", "cpu_cores", "memory_gib", "weight"]
    list_filter = ["flavor", "cohort", "flavor__scheduler"]
    search_fields = ["team__slug", "team__display_name", "flavor__name"]
    list_select_related = ["team", "flavor", "cohort"]
    autocomplete_fields = ["team"]


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ["name", "value", "description"]
    search_fields = ["name"]
